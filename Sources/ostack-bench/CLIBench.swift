import FoundationEssentials
import OStackCore
import OStackTestSupport
import PlatformKit

/// Start-up bound commands of the real binary against the process floor, measured in the same run
/// (docs/testing.md, "Benchmarks"): a C program that links the same four libraries as `ostack`
/// (SQLCipher, libsecret, libsodium, libcurl) and exits. Ratios, so a busy machine slows both sides.
///
/// - `cli-status-short`: `ostack status --short` (one line for a shell prompt) ≤ 1.5 × the floor.
/// - `cli-status-50-accounts`: `ostack status` with 50 registered accounts ≤ 2 × the floor.
/// - `cli-c-floor`: the floor itself; `cli-secret-tool-lookup`: one `secret-tool lookup`, for
///   information (the cost of a single keyring round trip, which neither command makes).
///
/// The runs are interleaved (floor, status, short, lookup, floor, …), so a burst of load elsewhere
/// hits every command alike; each is timed from `posix_spawn` to a blocking `waitpid`
/// (`Measure.spawn`), and each figure is the median of `runs`.
enum CLIBench {
    static let rows = ["cli-status-short", "cli-status-50-accounts", "cli-c-floor", "cli-secret-tool-lookup"]

    /// The floor: one trivial call into each library, so that the linker keeps all four as
    /// `NEEDED` (`--no-as-needed` keeps the glib libraries libsecret's pkg-config names too, as
    /// `ostack` links them). None of the calls initialises its library or does any work: this is
    /// the cost of exec, the dynamic loader and the libraries' own constructors — what every
    /// process linking them pays before its first line of code.
    static let floorSource = """
        #include <sqlite3.h>
        #include <libsecret/secret.h>
        #include <sodium.h>
        #include <curl/curl.h>

        int main(void) {
            volatile const char *sqlcipher = sqlite3_libversion();  /* returns a static string */
            volatile const char *sodium = sodium_version_string();  /* returns a static string */
            secret_password_free(NULL);                              /* returns at once on NULL */
            curl_free(NULL);                                         /* free(NULL) */
            (void)sqlcipher;
            (void)sodium;
            return 0;
        }

        """

    /// Compiles the floor program into `directory`; returns its path.
    static func buildFloor(in directory: String) throws -> String {
        let source = directory + "/c-floor.c"
        let binary = directory + "/c-floor"
        try SecureFileSystem.writeAtomically(Array(floorSource.utf8), to: source)
        let compile = try runProcess(
            executable: "/bin/sh",
            arguments: [
                "-c",
                "cc -O2 -o \"$0\" \"$1\" -Wl,--no-as-needed "
                    + "$(pkg-config --cflags --libs sqlcipher libsecret-1 libsodium libcurl)",
                binary, source,
            ])
        precondition(compile.status == 0, "compiling the C floor failed: \(compile.stderr)")
        let needed = try runProcess(executable: "/usr/bin/readelf", arguments: ["-d", binary]).stdout
        for library in ["libsqlcipher", "libsecret-1", "libsodium", "libcurl"] {
            precondition(needed.contains("[\(library).so"), "the C floor does not link \(library)")
        }
        return binary
    }

    static func run(ostack: String, runs: Int = 41) throws -> [BenchResult] {
        let home = TemporaryDirectory(prefix: "ostack-bench-cli")
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 0)
        let registry = AccountRegistry(layout: layout)
        let server = try ServerURL(parsing: "crm.example.com")
        // Data directory names as ostack makes them (the registry refuses any other).
        func directoryName(_ index: Int) -> String {
            let hex = String(index, radix: 16)
            return "acct-" + String(repeating: "0", count: 16 - hex.count) + hex
        }
        try registry.update { (accounts: inout [Account]) throws(OStackError) in
            for index in 0..<50 {
                let id = try AccountID(server: server, userID: "usr_\(index)")
                accounts.append(
                    Account(
                        id: id, alias: "account\(index)", server: server, userID: "usr_\(index)",
                        email: "user\(index)@example.com", displayName: "User \(index)", createdAt: Date(),
                        lastUsedAt: Date(),
                        keyringBackend: "secret-service", dataDirectory: directoryName(index),
                        credentialKind: .session,
                        sessionState: .signedIn, sessionExpiresAt: Date().addingTimeInterval(86_400 * 7),
                        sessionRefreshedAt: Date()))
            }
        }
        let defaultID = try AccountID(server: server, userID: "usr_7")
        try ConfigurationStore(layout: layout).update { $0.defaultAccount = defaultID }
        // The selected account's queue counts, as its last data command left them.
        let directory = layout.accountDirectory(directoryName(7))
        try SecureFileSystem.createDirectory(directory)
        try AccountStateSummary(pending: 2, failed: 1, conflict: 0, lastSyncAt: Date())
            .write(to: directory + "/state.json")
        var environment = ChildProcess.currentEnvironment()
        environment["OSTACK_HOME"] = home.path
        environment["OSTACK_ACCOUNT"] = nil

        let floor = try buildFloor(in: home.path)
        _ = try runProcess(
            executable: "/usr/bin/secret-tool",
            arguments: ["store", "--label=ostack bench", "app", "ostack-bench", "k", "v"],
            environment: environment, stdin: Array("bench-secret".utf8))
        defer {
            _ = try? runProcess(
                executable: "/usr/bin/secret-tool", arguments: ["clear", "app", "ostack-bench", "k", "v"],
                environment: environment)
        }

        let commands: [(name: String, executable: String, arguments: [String], output: String?)] = [
            ("floor", floor, [], nil),
            ("status", ostack, ["status"], "account7"),
            ("short", ostack, ["status", "--short"], "account7 no-pin 3 queued\n"),
            ("lookup", "/usr/bin/secret-tool", ["lookup", "app", "ostack-bench", "k", "v"], nil),
        ]
        // The output once (through pipes), then the timed runs (output to /dev/null, exact timing).
        for command in commands {
            let result = try runProcess(
                executable: command.executable, arguments: command.arguments, environment: environment)
            precondition(result.status == 0, "\(command.executable) failed: \(result.stderr)")
            if let output = command.output {
                precondition(
                    command.name == "short" ? result.stdout == output : result.stdout.contains(output),
                    "\(command.name): unexpected output \(result.stdout)")
            }
        }
        var samples = [String: [Double]]()
        for _ in 0..<runs {
            for command in commands {
                let run = Measure.spawn(command.executable, command.arguments, environment: environment)
                precondition(run.status == 0, "\(command.executable) exited with \(run.status)")
                samples[command.name, default: []].append(run.seconds)
            }
        }
        func median(_ name: String) -> Double { Measure.median(samples[name] ?? []) * 1000 }
        let cFloor = median("floor")
        let status = median("status")
        let short = median("short")
        let lookup = median("lookup")
        return [
            BenchResult(
                name: "cli-status-short", value: short, unit: "ms (median)", baseline: cFloor, ratio: short / cFloor,
                target: "<= 1.5 x C floor", ok: short <= 1.5 * cFloor),
            BenchResult(
                name: "cli-status-50-accounts", value: status, unit: "ms (median)", baseline: cFloor,
                ratio: status / cFloor, target: "<= 2 x C floor", ok: status <= 2 * cFloor),
            BenchResult(
                name: "cli-c-floor", value: cFloor, unit: "ms (median)", baseline: nil, ratio: nil,
                target: "baseline", ok: true),
            BenchResult(
                name: "cli-secret-tool-lookup", value: lookup, unit: "ms (median)", baseline: cFloor,
                ratio: lookup / cFloor, target: "information", ok: true),
        ]
    }
}
