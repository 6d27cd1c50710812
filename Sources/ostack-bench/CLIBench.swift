import FoundationEssentials
import OStackCore
import OStackTestSupport

/// `ostack status` with 50 registered accounts (median wall time of the real binary) against
/// `secret-tool lookup` of one keyring item, measured in the same run (target ≤ 25 ms: docs/testing.md, "Benchmarks").
enum CLIBench {
    static func run(ostack: String, runs: Int = 31) throws -> [BenchResult] {
        let home = TemporaryDirectory(prefix: "ostack-bench-cli")
        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 0)
        let registry = AccountRegistry(layout: layout)
        let server = try ServerURL(parsing: "crm.example.com")
        try registry.update { (accounts: inout [Account]) throws(OStackError) in
            for index in 0..<50 {
                let id = try AccountID(server: server, userID: "usr_\(index)")
                accounts.append(
                    Account(
                        id: id, alias: "account\(index)", server: server, userID: "usr_\(index)",
                        email: "user\(index)@example.com", displayName: "User \(index)", createdAt: Date(),
                        lastUsedAt: Date(),
                        keyringBackend: "secret-service", dataDirectory: "acct-\(index)", credentialKind: .session,
                        sessionState: .signedIn, sessionExpiresAt: Date().addingTimeInterval(86_400 * 7),
                        sessionRefreshedAt: Date()))
            }
        }
        let defaultID = try AccountID(server: server, userID: "usr_7")
        try ConfigurationStore(layout: layout).update { $0.defaultAccount = defaultID }
        var environment = ChildProcess.currentEnvironment()
        environment["OSTACK_HOME"] = home.path

        func timeRuns(_ executable: String, _ arguments: [String], stdin: [UInt8]? = nil) throws -> Double {
            var samples: [Double] = []
            for _ in 0..<runs {
                let start = Measure.now()
                let result = try runProcess(
                    executable: executable, arguments: arguments, environment: environment, stdin: stdin)
                samples.append(Measure.now() - start)
                precondition(result.status == 0, "\(executable) failed: \(result.stderr)")
            }
            return Measure.median(samples) * 1000
        }
        let status = try timeRuns(ostack, ["status"])
        _ = try runProcess(
            executable: "/usr/bin/secret-tool",
            arguments: ["store", "--label=ostack bench", "app", "ostack-bench", "k", "v"],
            environment: environment, stdin: Array("bench-secret".utf8))
        let lookup = try timeRuns("/usr/bin/secret-tool", ["lookup", "app", "ostack-bench", "k", "v"])
        _ = try runProcess(
            executable: "/usr/bin/secret-tool", arguments: ["clear", "app", "ostack-bench", "k", "v"],
            environment: environment)
        return [
            BenchResult(
                name: "cli-status-50-accounts", value: status, unit: "ms (median)", baseline: lookup,
                ratio: status / lookup, target: "<= 25 ms", ok: status <= 25),
            BenchResult(
                name: "cli-secret-tool-lookup", value: lookup, unit: "ms (median)", baseline: nil, ratio: nil,
                target: "baseline", ok: true),
        ]
    }
}
