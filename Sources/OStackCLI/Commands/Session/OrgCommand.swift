import ArgumentParser
import OStackCore

/// `ostack org list|switch` — the organizations of the selected account's user. Each organization
/// is an account context of its own (`login --organization`), so switching selects that context.
struct OrgCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "org", abstract: "List organizations and switch between their accounts.",
        subcommands: [List.self, Switch.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List the organizations you belong to.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let account = try context.selectedAccount().account
                let organizations = try SessionKeeper(environment: context.authEnvironment()).organizations(of: account)
                struct Organization: Encodable {
                    var id, name: String
                    var active: Bool
                }
                let rows = organizations.map {
                    Organization(id: $0.id, name: $0.name, active: $0.id == account.organization)
                }
                struct Document: Encodable { var organizations: [Organization] }
                context.emit(json: Document(organizations: rows)) {
                    Table(
                        headers: [context.terminal.defaultFormat == .table ? "" : "active", "id", "name"],
                        rows: rows.map { [$0.active ? "*" : "", $0.id, $0.name] }
                    ).render(terminal: context.terminal, whenEmpty: "No organizations.")
                }
            }
        }
    }

    struct Switch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "switch",
            abstract: "Make the account of another organization the default (sign in to it once first).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The organization id (see `ostack org list`).") var organization: String

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let current = try context.selectedAccount().account
                let accounts = try context.registry.accounts()
                guard
                    let target = accounts.first(where: {
                        $0.server == current.server && $0.userID == current.userID
                            && $0.environment == current.environment && $0.organization == organization
                    })
                else {
                    throw OStackError(
                        .notFound,
                        context: .init(
                            suggestion:
                                "No account for that organization yet: sign in to it once with \(command: .loginOrganization)."
                        ), detail: "no account for the organization")
                }
                try context.accountsService().switchTo(target.id.rawValue)
                struct Document: Encodable { var account: AccountReference }
                context.emit(json: Document(account: .init(target)), human: "Now using \(target.alias) by default.")
            }
        }
    }
}
