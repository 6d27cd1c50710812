import ArgumentParser
import OStackCore

/// `ostack auth refresh [ACCOUNT]`
struct AuthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth", abstract: "Manage sessions.", subcommands: [AuthRefresh.self])
}

struct AuthRefresh: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refresh",
        abstract: "Refresh the session now (API-key accounts never need it).",
        discussion: "Concurrent refreshes of one account are single-flight across processes.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var selection: AccountArgument

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let environment = try context.authEnvironment()
            let account = try selection.account(context)
            let refreshed = try SessionKeeper(environment: environment).refreshNow(account)
            let session = AccountsService.sessionStatus(of: refreshed, now: environment.clock.now())
            let service = context.accountsService()
            let summary = service.summary(
                of: refreshed, defaultAccount: try service.configuration.load().defaultAccount)
            let document = StatusDocument(
                account: AccountDocument(summary), selectedBy: nil,
                session: .init(state: session.state.rawValue, expiresAt: session.expiresAt), queue: nil, lastSyncAt: nil
            )
            let expiry = session.expiresAt.map { ", expires \($0.formatted(.iso8601))" } ?? ""
            context.emit(json: document, human: "Session of \(refreshed.alias): \(session.state.rawValue)\(expiry)")
        }
    }
}
