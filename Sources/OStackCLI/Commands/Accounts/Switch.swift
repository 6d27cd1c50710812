import ArgumentParser
import OStackCore

/// `ostack switch ACCOUNT` — changes only the default account (config), atomically.
struct Switch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switch",
        abstract: "Make an account the default.",
        discussion: "Only the default changes; shells that set OSTACK_ACCOUNT or pass --account are unaffected.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The account (id, alias or email@host).", completion: ShellCompletions.accounts) var target: String

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let service = context.accountsService()
            let account = try service.switchTo(target)
            struct Document: Encodable { var account: AccountDocument }
            let summary = service.summary(of: account, defaultAccount: account.id)
            context.emit(json: Document(account: AccountDocument(summary)), human: "Default account: \(account.alias)")
        }
    }
}
