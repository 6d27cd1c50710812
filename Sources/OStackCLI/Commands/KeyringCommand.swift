import ArgumentParser
import OStackCore
import PlatformKit

/// `ostack keyring migrate --to secret-service|file [ACCOUNT|--all]`
struct KeyringCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyring", abstract: "Manage where account secrets are kept.", subcommands: [KeyringMigrate.self])
}

struct KeyringMigrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Move account secrets to another keyring backend (copy, verify, delete; run again to resume).")

    @OptionGroup var global: GlobalOptions
    @Option(name: .customLong("to"), help: "secret-service or file.") var target: String
    @Argument(help: "The account (default: every account).", completion: ShellCompletions.accounts) var account: String?

    func validate() throws {
        guard LiveDependencies.backendNames.contains(target) else {
            throw ValidationError("--to takes secret-service or file.")
        }
    }

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let environment = try context.authEnvironment()
            guard let migration = LiveDependencies.keyringMigration(context, environment) else { return }
            let accounts =
                try account.map { [try AccountSelection(accounts: context.registry.accounts()).resolve($0)] }
                ?? context.registry.accounts()
            struct Row: Encodable { var account: AccountReference; var moved: Int; var cleaned: Int }
            var rows: [Row] = []
            for account in accounts {
                let outcome = try migration.migrate(account, to: target)  // audits the backend change
                rows.append(Row(account: .init(account), moved: outcome.moved, cleaned: outcome.cleaned))
            }
            struct Document: Encodable { var backend: String; var accounts: [Row] }
            context.emit(json: Document(backend: target, accounts: rows)) { () -> String in
                rows.isEmpty
                    ? "No accounts."
                    : rows.map { "\($0.account.alias): \(target) (\($0.moved) item\($0.moved == 1 ? "" : "s") moved)" }
                        .joined(separator: "\n")
            }
        }
    }
}
