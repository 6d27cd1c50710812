import KeyringKit
import OStackCore
import OStackTestSupport
import SodiumKit

/// PIN unlock at MODERATE (target: ≤ 1.05 × a bare Argon2id MODERATE derivation), measured
/// in-process on the command's own code path (LockService with the real Secret Service and agent),
/// against a bare Argon2id derivation with the envelope's stored parameters in the same run. A ratio,
/// so a busy machine slows both sides alike. Process start-up, the same for every command, is what
/// the `cli` bench measures.
enum UnlockBench {
    static let rows = ["unlock-moderate", "unlock-overhead", "argon2id-moderate-bare"]

    static func run(ostack: String, runs: Int = 15) throws -> [BenchResult] {
        let server = try DevServerProcess()
        let home = TemporaryDirectory(prefix: "ostack-bench-unlock")
        let prefix = "ostack-bench-\(UInt32.random(in: 0...UInt32.max))"
        var environment = ChildProcess.currentEnvironment()
        environment["OSTACK_HOME"] = home.path
        environment["OSTACK_KEYRING_PREFIX"] = prefix
        func ostackRun(_ arguments: [String], _ stdin: String) throws {
            let result = try runProcess(
                executable: ostack, arguments: arguments, environment: environment, stdin: Array(stdin.utf8))
            precondition(result.status == 0, "ostack \(arguments.joined(separator: " ")) failed: \(result.stderr)")
        }
        try ostackRun(
            ["login", "--server", server.url, "--email", "alice@example.com", "--password-stdin"], "alice-pass\n")
        try ostackRun(["pin", "set", "--pin-stdin"], "7319\n")  // MODERATE; starts the agent

        let layout = FileLayout(environment: ["OSTACK_HOME": home.path], userID: 0)
        let namespaces = KeyringNamespaces(prefix: prefix)
        var auth = AuthEnvironment(
            layout: layout, secrets: KeyringSecretStore(keyring: SecretServiceKeyring()), namespaces: namespaces,
            transport: CurlTransport(), keyringBackend: "secret-service", provisionDatabase: AccountDatabase.provision)
        var agent = AgentClient(layout: layout, namespaces: namespaces)
        agent.executable = ostack
        auth.agent = agent
        let service = LockService(environment: auth, agent: agent, processEnvironment: environment)
        let account = try AccountRegistry(layout: layout).accounts()[0]
        let envelope = try KeyEnvelope.read(from: auth.pinEnvelopePath(account))!
        let pin = PIN(SecretBytes(copying: Array("7319".utf8)))

        var unlocks: [Double] = []
        var argon: [Double] = []
        agent.forget(account.id)
        try service.unlock(account, pin: pin)  // warm-up: first keyring session, agent start
        for _ in 0..<runs {
            agent.forget(account.id)
            unlocks.append(try Measure.time { try service.unlock(account, pin: pin) })
            argon.append(try Measure.time { _ = try Argon2id.deriveKey(password: pin.bytes, parameters: envelope.kdf) })
        }
        _ = try? agent.stop()
        let unlock = Measure.median(unlocks) * 1000
        let baseline = Measure.median(argon) * 1000
        // Paired: each unlock is followed by a bare derivation, so the medians of the differences and
        // of the ratios are free of the run-to-run drift of Argon2id itself.
        let overhead = Measure.median(zip(unlocks, argon).map { $0 - $1 }) * 1000
        let ratio = Measure.median(zip(unlocks, argon).map { $0 / $1 })
        return [
            BenchResult(
                name: "unlock-moderate", value: unlock, unit: "ms (median)", baseline: baseline,
                ratio: unlock / baseline, target: "information", ok: true),
            BenchResult(
                name: "unlock-overhead", value: overhead, unit: "ms (median of pairs)", baseline: baseline,
                ratio: ratio, target: "unlock <= 1.05 x Argon2id", ok: ratio <= 1.05),
            BenchResult(
                name: "argon2id-moderate-bare", value: baseline, unit: "ms (median)", baseline: nil, ratio: nil,
                target: "baseline", ok: true),
        ]
    }
}
