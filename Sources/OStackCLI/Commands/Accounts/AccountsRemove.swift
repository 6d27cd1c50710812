import ArgumentParser
import OStackCore

/// `ostack accounts remove ACCOUNT [--force]` — crypto-erase.
struct AccountsRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove an account: its keyring items first (verified), then its files, then its entry.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The account (id, alias or email@host).", completion: ShellCompletions.accounts) var target: String
    @Flag(name: .long, help: "Remove even with unsynced changes (they are lost).") var force = false
    @Flag(name: [.customShort("y"), .long], help: "Do not ask for confirmation on a terminal.") var yes = false

    func run() async throws {
        try await CommandRunner.run(global) { context in
            var context = context
            context.checksSettings = false  // removing an account works whatever config.json holds
            let environment = try context.authEnvironment()
            guard let account = try context.accounts(target: target, all: false, exactFor: "Removing an account").first
            else { return }
            // Unsynced changes are counted before the question (no question for a removal that is
            // refused anyway) and again after it: the answer may take minutes, and another shell may
            // queue a change meanwhile. One open database counts both times, so an account that
            // locks itself while the question waits is still counted. (An interrupted removal
            // already deleted the keys: its data cannot be counted or kept.)
            var counter: AccountSession?
            if !force && !LogoutService.removalPending(environment, account) {
                do {
                    counter = try context.session(account)
                } catch let error as OStackError where error.code == .locked || error.code == .pinLockedOut {
                    throw OStackError(
                        .locked, context: .init(account: account.alias),
                        detail: "cannot count unsynced changes while locked")
                }
            }
            // With --force the changes are counted too, where the account opens (not while
            // locked): the audit event says whether unsynced changes were thrown away.
            if force && !LogoutService.removalPending(environment, account) { counter = try? context.session(account) }
            func unsynced() throws(OStackError) -> Int {
                guard let counts = try counter?.store.counts() else { return 0 }
                return counts.pending + counts.failed + counts.conflict
            }
            let before = try unsynced()
            if before > 0 && !force {
                throw OStackError(.unsyncedChanges, context: .init(account: account.alias, count: before))
            }
            try context.confirm(
                "Remove account \(account.alias): its keyring items, local database and audit trail?", yes: yes)
            let pending = try unsynced()
            counter = nil  // closed before its files are removed
            try LogoutService(environment: environment).remove(account, unsyncedChanges: pending, force: force)
            struct Document: Encodable { var removed: String }
            context.emit(json: Document(removed: account.id.rawValue), human: "Removed account \(account.alias).")
        }
    }
}
