import ArgumentParser
import OStackCore

/// `ostack accounts list`
struct AccountsList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List registered accounts.")

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let summaries = try context.accountsService().summaries()
            struct Document: Encodable { var accounts: [AccountDocument] }
            context.emit(json: Document(accounts: summaries.map(AccountDocument.init))) { () -> String in
                let rows = summaries.map { summary in
                    [
                        summary.isDefault ? "*" : "", summary.account.alias, summary.account.email,
                        summary.account.server.absoluteString, Self.state(summary),
                    ]
                }
                // The default account's column is unnamed in a table (a `*`), named in a line format.
                let mark = context.terminal.defaultFormat == .table ? "" : "default"
                return Table(headers: [mark, "alias", "email", "server", "state"], rows: rows).render(
                    terminal: context.terminal, whenEmpty: "No accounts yet. Run `ostack login` to add one.")
            }
        }
    }

    static func state(_ summary: AccountSummary) -> String {
        var parts = [summary.account.sessionState.rawValue]
        if summary.account.credentialKind == .apiKey { parts.append("API key") }
        if summary.locked { parts.append("locked") }
        return parts.joined(separator: ", ")
    }
}
