import Glibc
import ArgumentParser
import FoundationEssentials
import OStackCore
import PlatformKit

/// `ostack sync [--all] [--push-only|--pull-only] [--watch [--interval 5m]]`, `sync track|untrack`,
/// `sync status` (docs/sync.md).
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "Push queued changes and pull tracked objects.",
        subcommands: [Run.self, Track.self, Untrack.self, SyncStatus.self], defaultSubcommand: Run.self)

    struct AccountReport: Encodable {
        var id: String
        var alias: String
        var pushed: Int
        var pulled: Int
        var deleted: Int
        var failed: Int
        var conflicts: Int
        /// Records the server sent that could not be stored (docs/sync.md, "Pull").
        var rejected = 0
        var ok: Bool
        var error: String?
    }

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "run", abstract: "Sync now (the default).")
        @OptionGroup var global: GlobalOptions
        @Flag(name: .long, help: "Sync every signed-in account.") var all = false
        @Flag(name: .customLong("push-only"), help: "Only push queued changes.") var pushOnly = false
        @Flag(name: .customLong("pull-only"), help: "Only pull tracked objects.") var pullOnly = false
        @Flag(name: .long, help: "Also compare every record with the server now: deletions, and writes the pulls missed.") var reconcile = false
        @Flag(name: .long, help: "Keep syncing every --interval until interrupted.") var watch = false
        @Option(
            name: .long, help: "Time between syncs with --watch, e.g. 30s, 5m (default: the sync.interval setting).")
        var interval: String?

        /// The local time of day, `HH:MM:SS`, for `--watch` lines.
        static func clockTime() -> String {
            var now = time(nil)
            var parts = tm()
            localtime_r(&now, &parts)
            func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
            return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
        }

        func validate() throws {
            if pushOnly && pullOnly { throw ValidationError("Pass --push-only or --pull-only, not both.") }
            if all && global.account != nil { throw ValidationError("Pass --account or --all, not both.") }
            if let interval, Setting.duration(interval) == nil {
                throw ValidationError("--interval takes a duration such as 30s or 5m.")
            }
            // Without --watch there is no second sync for it to space: it was ignored.
            if interval != nil && !watch {
                throw ValidationError("--interval is the time between syncs of --watch: pass both.")
            }
        }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let configured = try context.configuration.load().validValue(of: "sync.interval")
                let seconds = Setting.duration(interval ?? configured) ?? 300
                var cycle = 0
                var context = context
                while true {
                    let failed = try syncOnce(context, watchCycle: watch ? cycle : nil)
                    context.countsAsUse = false  // later watch cycles do not keep the account unlocked
                    cycle += 1
                    if !watch {
                        if let failed { throw failed }
                        return
                    }
                    if Terminal.stdoutReaderGone { return }  // `sync --watch | head -3` has its lines
                    try await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
                }
            }
        }

        /// One pass over the accounts; returns the error to exit with when an account did not sync.
        /// Under `--watch` (`watchCycle`) the human lines carry the time, and after the first cycle an
        /// account is shown only when something moved or went wrong; an idle cycle writes no audit event.
        func syncOnce(_ context: CommandContext, watchCycle: Int? = nil) throws -> OStackError? {
            let accounts =
                all
                ? try context.registry.accounts().filter { $0.sessionState != .signedOut }
                : [try context.selectedAccount().account]
            var reports: [AccountReport] = []
            var firstError: OStackError?
            let line = ProgressLine.make(context: context)
            InterruptMessage.install(
                "ostack: interrupted: what was pulled and pushed so far is kept (`ostack sync status` calls this sync "
                    + "partial); run `ostack sync` to finish.")
            defer { InterruptMessage.remove() }
            for account in accounts {
                var report = AccountReport(
                    id: account.id.rawValue, alias: account.alias, pushed: 0, pulled: 0, deleted: 0, failed: 0,
                    conflicts: 0, ok: false)
                do throws(OStackError) {
                    // Known signed out or expired: not synced, even with nothing to send or pull (it
                    // said "pushed 0, pulled 0" and exit 0 without reaching the server).
                    try account.requireSignedIn()
                    let session = try context.session(account)
                    var progress: (@Sendable (SyncProgress) -> Void)?
                    if let line { progress = { line.update($0) } }
                    let result = try session.sync.sync(
                        push: !pullOnly, pull: !pushOnly, reconcile: reconcile, auditIdle: watchCycle == nil,
                        progress: progress)
                    line?.clear()
                    report.pushed = result.pushed
                    report.pulled = result.pulled
                    report.deleted = result.deleted
                    report.failed = result.failed
                    report.conflicts = result.conflicts
                    report.rejected = result.rejected.count
                    report.ok = result.ok
                    report.error = result.error?.code.rawValue
                    if let error = result.exitError(account: account.alias) { firstError = firstError ?? error }
                } catch {
                    line?.clear()
                    // One locked account: thrown before anything is printed, so that on a terminal
                    // the PIN is asked for and the sync runs (unlock on demand).
                    if error.code == .locked && !all { throw error }
                    report.error = error.code.rawValue
                    firstError = firstError ?? error
                }
                reports.append(report)
            }
            struct Document: Encodable { var accounts: [AccountReport] }
            context.emit(json: Document(accounts: reports)) {
                let shown =
                    (watchCycle ?? 0) == 0
                    ? reports
                    : reports.filter {
                        $0.pushed + $0.pulled + $0.deleted + $0.failed + $0.conflicts + $0.rejected > 0
                            || $0.error != nil
                    }
                let time = watchCycle == nil ? "" : Self.clockTime() + " "
                return shown.map { report in
                    var line = "\(report.alias): pushed \(report.pushed), pulled \(report.pulled)"
                    if report.deleted > 0 { line += ", removed \(report.deleted)" }
                    if report.failed > 0 { line += ", \(report.failed) failed" }
                    if report.conflicts > 0 { line += ", \(report.conflicts) in conflict" }
                    if report.rejected > 0 { line += ", \(report.rejected) not stored" }
                    if let error = report.error { line += " — not synced (\(error))" }
                    return time + line
                }.joined(separator: "\n")
            }
            return firstError
        }
    }

    struct Track: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "track", abstract: "Mirror an object locally (pulled by `sync`).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object, e.g. task.", completion: ShellCompletions.objects) var object: String

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let schema = try context.selectedSession().sync.track(object)
                struct Document: Encodable { var tracked: String }
                context.emit(
                    json: Document(tracked: schema.name), human: "Tracking \(schema.name); `ostack sync` pulls it.")
            }
        }
    }

    struct Untrack: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "untrack", abstract: "Stop mirroring an object (queued changes are kept).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object.", completion: ShellCompletions.objects) var object: String
        @Flag(name: [.customShort("y"), .long], help: "Do not ask for confirmation on a terminal.") var yes = false

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let session = try context.selectedSession()
                struct Document: Encodable { var untracked: String }
                // An object that is not tracked (a typo, an object untracked before) is named as such;
                // it said "No longer tracking" whatever the name was.
                guard try session.store.isTracked(object) else {
                    let shown = ErrorPresenter.sanitize(object, maxLength: 100)
                    context.emit(json: Document(untracked: object), human: "\(shown) was not tracked: nothing changed.")
                    return
                }
                let count = (try? session.store.recordCount(object)) ?? 0
                try context.confirm(
                    "Stop tracking \(object) and drop its \(count) local \(count == 1 ? "record" : "records") (queued changes are kept)?",
                    yes: yes)
                try session.sync.untrack(object)
                context.emit(json: Document(untracked: object), human: "No longer tracking \(object).")
            }
        }
    }

    struct SyncStatus: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status", abstract: "Show tracked objects and the queue.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let account = try context.selectedAccount().account
                let status = try context.session(account).sync.status()
                struct Document: Encodable {
                    var account: AccountReference
                    var objects: [SyncService.Status.Object]
                    var queue: LocalStore.QueueCounts
                    var lastSyncAt: Date?
                    /// A later sync that did not complete (interrupted or stopped part-way), or null.
                    var partialSyncAt: Date?
                }
                let objects = status.objects
                let document = Document(
                    account: .init(account), objects: objects, queue: status.queue, lastSyncAt: status.lastSyncAt,
                    partialSyncAt: status.partialSyncAt)
                let table = Table(
                    headers: ["object", "records", "pulled"],
                    rows: objects.map {
                        [
                            $0.name, String($0.records),
                            $0.lastPullAt.map { RecordText.age(Date().timeIntervalSince($0)) + " ago" } ?? "never",
                        ]
                    })
                context.emit(json: document) {
                    // `--format tsv|csv` asked for rows: the objects' table alone (the rest is in `--json`).
                    if let asked = context.terminal.format, asked == .tsv || asked == .csv {
                        return table.render(as: asked, terminal: context.terminal)
                    }
                    var text = "account  \(account.alias)\n"
                    text +=
                        "queue    \(document.queue.pending) pending, \(document.queue.failed) failed, \(document.queue.conflict) in conflict\n"
                    let ago = { (date: Date) in RecordText.age(Date().timeIntervalSince(date)) + " ago" }
                    text += "synced   \(document.lastSyncAt.map(ago) ?? "never")\n"
                    if let partial = document.partialSyncAt {
                        text +=
                            "partial  a sync \(ago(partial)) did not finish; what it pulled is kept (`ostack sync`)\n"
                    }
                    if objects.isEmpty { return text + "No tracked objects (`ostack sync track OBJECT`)." }
                    return text + "\n" + table.render(terminal: context.terminal)
                }
            }
        }
    }
}
