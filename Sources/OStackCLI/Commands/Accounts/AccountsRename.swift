import ArgumentParser
import OStackCore

/// `ostack accounts rename ACCOUNT NEW-ALIAS`
struct AccountsRename: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rename", abstract: "Give an account a new alias.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The account (id, alias or email@host).", completion: ShellCompletions.accounts) var account: String
    @Argument(help: "The new alias.") var alias: String

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let service = context.accountsService()
            let renamed = try service.rename(account, to: alias)
            let defaultAccount = try service.configuration.load().defaultAccount
            struct Document: Encodable { var account: AccountDocument }
            let summary = service.summary(of: renamed, defaultAccount: defaultAccount)
            context.emit(json: Document(account: AccountDocument(summary)), human: "Renamed to \(renamed.alias).")
        }
    }
}
