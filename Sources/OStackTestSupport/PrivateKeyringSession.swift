import Glibc

/// A private D-Bus session bus of its own (not the test process's), with a gnome-keyring that the
/// test can stop, restart without its login collection, lock, or replace by a fake — for keyring
/// states that would disturb every other test sharing the session's keyring.
///
/// Pass `environment` to `OStackRunner.run(…, environment:)`. `close()` (or deinit) stops the bus and
/// the daemons started here, by their process ids.
public final class PrivateKeyringSession: @unchecked Sendable {
    // @unchecked Sendable: used from one test at a time.
    public static let password = "ostack-private-keyring"

    public let home: TemporaryDirectory
    public let address: String
    let bus: ChildProcess
    var fake: ChildProcess?

    /// The variables that point a child process at this bus (and its keyring's directories).
    public var environment: [String: String?] {
        ["DBUS_SESSION_BUS_ADDRESS": address, "OSTACK_KEYRING_SESSION": "1"]
    }

    var keyringEnvironment: [String: String] {
        var env = ChildProcess.currentEnvironment()
        env["DBUS_SESSION_BUS_ADDRESS"] = address
        env["XDG_DATA_HOME"] = home.path + "/data"
        env["XDG_RUNTIME_DIR"] = home.path + "/run"
        return env
    }

    public init() throws {
        home = TemporaryDirectory(prefix: "ostack-bus")
        mkdir(home.path + "/data", 0o700)
        mkdir(home.path + "/run", 0o700)
        bus = try ChildProcess(
            executable: "/usr/bin/dbus-daemon",
            arguments: [
                "--session", "--nofork", "--nopidfile", "--print-address=1", "--address=unix:path=\(home.path)/bus",
            ])
        guard let line = try bus.readLine(timeout: 20), !line.isEmpty else {
            bus.kill()
            throw KeyringSessionError.message("dbus-daemon did not start: \(bus.stderrText())")
        }
        address = line
    }

    deinit { close() }

    public func close() {
        fake?.kill()
        fake = nil
        if let pid = ownerPID() { Glibc.kill(pid, SIGKILL) }
        bus.kill()
    }

    /// Starts gnome-keyring; `unlocked` creates (or unlocks) the login collection, which becomes the default.
    public func startKeyring(unlocked: Bool = true) throws {
        // In a session of its own: runProcess kills its child's process group when it is done, and the
        // daemon stays in that group after it forks.
        let result = try runProcess(
            executable: "/usr/bin/setsid",
            arguments: ["--wait", "/usr/bin/gnome-keyring-daemon"]
                + (unlocked ? ["--unlock", "--components=secrets"] : ["--start", "--components=secrets"]),
            environment: keyringEnvironment, stdin: unlocked ? Array(Self.password.utf8) : nil, timeout: 20)
        guard result.status == 0 else { throw KeyringSessionError.message("gnome-keyring: \(result.stderr)") }
        try waitForOwner()
        if unlocked { try waitUntilDefaultIsUnlocked() }
    }

    /// Kills the keyring daemon (by the pid the bus reports) and waits until the name is free.
    public func stopKeyring() throws {
        guard let pid = ownerPID() else { return }
        Glibc.kill(pid, SIGKILL)
        for _ in 0..<100 where ownerPID() != nil { usleep(50_000) }
    }

    /// gnome-keyring restarted without its login keyring (as when D-Bus re-activates it): no default
    /// collection. `restoreLoginKeyring` brings it back.
    public func restartWithoutLoginKeyring() throws {
        try stopKeyring()
        rename(home.path + "/data/keyrings", home.path + "/data/keyrings.away")
        try startKeyring(unlocked: false)
    }

    public func restoreLoginKeyring() throws {
        try stopKeyring()
        let away = home.path + "/data/keyrings.away"
        if access(away, F_OK) == 0 {
            _ = try runProcess(executable: "/bin/rm", arguments: ["-rf", home.path + "/data/keyrings"])
            rename(away, home.path + "/data/keyrings")
        }
        try startKeyring(unlocked: true)
    }

    /// Locks the login collection.
    public func lockLogin() throws {
        let result = try dbusSend([
            "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock",
            "array:objpath:/org/freedesktop/secrets/collection/login",
        ])
        guard result.status == 0 else { throw KeyringSessionError.message("lock: \(result.stderr)") }
    }

    /// Replaces the keyring by a fake Secret Service that owns the name and never answers.
    public func startHungService(script: String) throws {
        try stopKeyring()
        var env = keyringEnvironment
        env["PYTHONUNBUFFERED"] = "1"
        fake = try ChildProcess(executable: "/usr/bin/python3", arguments: [script, "300"], environment: env)
        try waitForOwner()
    }

    func dbusSend(_ arguments: [String]) throws -> ProcessResult {
        try runProcess(
            executable: "/usr/bin/dbus-send", arguments: ["--session", "--print-reply"] + arguments,
            environment: keyringEnvironment, timeout: 10)
    }

    func ownerPID() -> pid_t? {
        guard
            let result = try? dbusSend([
                "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:org.freedesktop.secrets",
            ]), result.status == 0,
            let word = result.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }).last
        else { return nil }
        return pid_t(word)
    }

    func waitForOwner() throws {
        for _ in 0..<200 {
            if ownerPID() != nil { return }
            usleep(50_000)
        }
        throw KeyringSessionError.message("nobody owns org.freedesktop.secrets")
    }

    func waitUntilDefaultIsUnlocked() throws {
        for _ in 0..<100 {
            let result = try dbusSend([
                "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets/aliases/default",
                "org.freedesktop.DBus.Properties.Get", "string:org.freedesktop.Secret.Collection", "string:Locked",
            ])
            if result.stdout.contains("boolean false") { return }
            usleep(100_000)
        }
        throw KeyringSessionError.message("the login collection did not come up unlocked")
    }
}

public enum KeyringSessionError: Error, CustomStringConvertible {
    case message(String)
    public var description: String {
        switch self {
        case .message(let text): text
        }
    }
}
