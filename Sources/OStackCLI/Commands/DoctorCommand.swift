import ArgumentParser
import FoundationEssentials
import KeyringKit
import OStackCore

/// `ostack doctor [--json]` (docs/audit.md, "Doctor"): exit 0 when no check fails, 1 otherwise.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor", abstract: "Check the keyring, settings, files, databases, sessions, sync and audit trails.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "Only this account (default: every account).", completion: ShellCompletions.accounts) var target:
        String?

    func run() async throws {
        try await CommandRunner.run(global) { context in
            var context = context
            context.countsAsUse = false  // checking an account is not using it (LOCK-2)
            let environment = try context.makeAuthEnvironment(context)
            var doctor = Doctor(environment: environment)
            let transport = environment.transport
            doctor.probeServerDate = { account in AuthAPI(account: account, transport: transport).serverDate() }
            let registered = try context.registry.accounts()
            if environment.keyringBackend == "secret-service"
                || registered.contains(where: { $0.keyringBackend == "secret-service" })
            {
                doctor.keyringProvider = { SecretServiceKeyring.detectProvider() }
            }
            if let migration = LiveDependencies.keyringMigration(context, environment) {
                doctor.staleCopies = { account throws(OStackError) in try migration.staleCopies(of: account) }
            }
            let accounts =
                try target.map { [try AccountSelection(accounts: context.registry.accounts()).resolve($0)] }
                ?? context.registry.accounts()
            let checks = doctor.run(accounts: accounts)
            let ok = !checks.contains { $0.status == .fail }
            /// A check with its wording rendered; the same keys as ever under `--json`.
            /// (A check that is not about an account left `account` out; the docs say `null`.)
            struct RenderedCheck: Encodable {
                var name: String
                @AlwaysPresent var account: AccountReference?
                var status: Doctor.Check.Status
                var message: String
                @AlwaysPresent var fix: String?
                var checked: Bool
            }
            struct Document: Encodable {
                var ok: Bool
                var checks: [RenderedCheck]
            }
            let byAlias = Dictionary(accounts.map { ($0.alias, $0) }, uniquingKeysWith: { first, _ in first })
            let rendered = checks.map { check in
                RenderedCheck(
                    name: check.name, account: check.account.flatMap { byAlias[$0] }.map(AccountReference.init),
                    status: check.status, message: check.message.rendered,
                    fix: check.fix?.rendered, checked: check.checked)
            }
            context.emit(json: Document(ok: ok, checks: rendered)) {
                rendered.map { check in
                    let mark = ["ok": "ok  ", "warn": "warn", "fail": "FAIL"][check.status.rawValue] ?? "?"
                    // Each line sanitised on its own: the sanitiser removes line breaks (the fix
                    // was run into the message, and a long pair cut at 400 characters).
                    var line = ErrorPresenter.sanitize(
                        "\(mark)  \(check.account.map { "\($0.alias): " } ?? "")\(check.name): \(check.message)",
                        maxLength: 400)
                    if let fix = check.fix, check.status != .ok {
                        line += "\n      fix: " + ErrorPresenter.sanitize(fix, maxLength: 400)
                    }
                    return line
                }.joined(separator: "\n")
            }
            if !ok { throw ExitCode(1) }
        }
    }
}
