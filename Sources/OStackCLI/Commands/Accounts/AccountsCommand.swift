import ArgumentParser

/// `ostack accounts …`
struct AccountsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts",
        abstract: "List, rename and remove accounts.",
        subcommands: [AccountsList.self, AccountsRename.self, AccountsRemove.self],
        defaultSubcommand: AccountsList.self
    )
}
