import Glibc

/// Why a helper of this module could not do what a test asked.
public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Runs the built `ostack` binary in an isolated home (temp `OSTACK_HOME`) with its own keyring
/// prefix, as a user would, and returns exit code, stdout and stderr.
public final class OStackRunner: @unchecked Sendable {
    // @unchecked Sendable: immutable after init.
    public let home: TemporaryDirectory
    public let keyringPrefix: String
    public let baseEnvironment: [String: String]

    public init() {
        home = TemporaryDirectory(prefix: "ostack-e2e")
        keyringPrefix = "ostack-e2e-\(UInt32.random(in: 0...UInt32.max))"
        var environment = ChildProcess.currentEnvironment()
        environment["OSTACK_HOME"] = home.path
        environment["OSTACK_KEYRING_PREFIX"] = keyringPrefix
        environment["OSTACK_ACCOUNT"] = nil
        environment["NO_COLOR"] = "1"
        // The whole suite shares one keyring daemon on a small machine: a Secret Service call can
        // wait behind dozens of others. Tests of the deadline itself set their own.
        environment["OSTACK_KEYRING_TIMEOUT"] = "30"
        baseEnvironment = environment
    }

    /// `ostack <arguments>` with optional stdin and extra environment (nil values unset a variable).
    @discardableResult
    public func run(
        _ arguments: [String], stdin: String? = nil, environment: [String: String?] = [:], passphrase: String? = nil,
        timeout: Double = 60
    ) throws -> ProcessResult {
        var env = baseEnvironment
        for (key, value) in environment { env[key] = value }
        if passphrase != nil { env["OSTACK_KEYRING_PASSPHRASE_FD"] = "3" }
        let child = try ChildProcess(
            executable: OStackBinary.path, arguments: arguments, environment: env, stdin: stdin.map { Array($0.utf8) },
            fd3: passphrase.map { Array(($0 + "\n").utf8) })
        let status = try child.waitForExit(timeout: timeout)
        return ProcessResult(status: status, stdout: child.remainingStdout(), stderr: child.stderrText())
    }

    /// Starts `ostack` without waiting (for concurrency and kill tests).
    public func start(_ arguments: [String], stdin: String? = nil, environment: [String: String?] = [:]) throws
        -> ChildProcess
    {
        var env = baseEnvironment
        for (key, value) in environment { env[key] = value }
        return try ChildProcess(
            executable: OStackBinary.path, arguments: arguments, environment: env,
            stdin: stdin.map { Array($0.utf8) })
    }

    /// Starts `ostack <arguments>` with `OSTACK_FAILPOINT=pause:<point>` and returns once it is inside
    /// that two-second pause (the fail point's mark file exists), however long it took to get there.
    public func startPaused(
        at point: String, _ arguments: [String], stdin: String? = nil, environment: [String: String?] = [:]
    ) throws -> ChildProcess {
        let mark = home.appending("failpoint-mark-\(UInt32.random(in: 0...UInt32.max))")
        var environment = environment
        environment["OSTACK_FAILPOINT"] = "pause:" + point
        environment["OSTACK_FAILPOINT_MARK"] = mark
        let child = try start(arguments, stdin: stdin, environment: environment)
        defer { unlink(mark) }
        let deadline = ChildProcess.now() + 60
        while access(mark, F_OK) != 0 {
            // Ended: past its pause already (this test process was held up longer than the pause)
            // when the mark is there, else it never reached the point.
            if let status = try? child.waitForExit(timeout: 0.02) {
                if access(mark, F_OK) == 0 { break }
                throw TestSupportError(
                    "ostack \(arguments.first ?? "") ended (\(status)) before \(point): \(child.stderrText())")
            }
            if ChildProcess.now() > deadline {
                child.kill()
                throw TestSupportError("ostack \(arguments.first ?? "") never reached \(point)")
            }
        }
        return child
    }

    /// Signs in through `--password-stdin`.
    @discardableResult
    public func login(
        _ server: String, _ email: String, _ password: String, extra: [String] = [],
        environment: [String: String?] = [:]
    ) throws -> ProcessResult {
        try run(
            ["login", "--server", server, "--email", email, "--password-stdin"] + extra, stdin: password + "\n",
            environment: environment)
    }

    /// `secret-tool search --all namespace <ns>` output (items of one namespace).
    public func keyringItems(namespace: String) throws -> String {
        let result = try runSecretTool(["search", "--all", "namespace", namespace])
        return result.stdout + result.stderr
    }

    /// Every file below the home directory, concatenated (for canary scans).
    public func allFileBytes() throws -> [UInt8] {
        let listing = try runProcess(executable: "/usr/bin/find", arguments: [home.path, "-type", "f"])
        var bytes: [UInt8] = []
        for path in listing.stdout.split(separator: "\n") {
            bytes += (try? runProcess(executable: "/bin/cat", arguments: [String(path)]))?.stdout.utf8.map { $0 } ?? []
        }
        return bytes
    }
}
