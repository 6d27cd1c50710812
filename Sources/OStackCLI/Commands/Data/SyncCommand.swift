import Glibc
import ArgumentParser
import FoundationEssentials
import OStackCore
import PlatformKit

/// `ostack sync [--all] [--push-only|--pull-only] [--watch [--interval 5m]]`, `sync track|untrack`,
/// `sync status` (SPEC §8).
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
        var ok: Bool
        var error: String?
    }

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "run", abstract: "Sync now (the default).")
        @OptionGroup var global: GlobalOptions
        @Flag(name: .long, help: "Sync every signed-in account.") var all = false
        @Flag(name: .customLong("push-only"), help: "Only push queued changes.") var pushOnly = false
        @Flag(name: .customLong("pull-only"), help: "Only pull tracked objects.") var pullOnly = false
        @Flag(name: .long, help: "Also look for records deleted on the server now.") var reconcile = false
        @Flag(name: .long, help: "Keep syncing every --interval until interrupted.") var watch = false
        @Option(name: .long, help: "Time between syncs with --watch, e.g. 30s, 5m.") var interval: String = "5m"

        func validate() throws {
            if pushOnly && pullOnly { throw ValidationError("Pass --push-only or --pull-only, not both.") }
            guard let seconds = Setting.duration(interval), seconds >= 1 else {
                throw ValidationError("--interval takes a duration such as 30s or 5m.")
            }
        }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let seconds = Setting.duration(interval) ?? 300
                while true {
                    let failed = try syncOnce(context)
                    if !watch {
                        if let failed { throw failed }
                        return
                    }
                    try await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
                }
            }
        }

        /// One pass over the accounts; returns the error to exit with when an account did not sync.
        func syncOnce(_ context: CommandContext) throws -> OStackError? {
            let accounts =
                all
                ? try context.registry.accounts().filter { $0.sessionState != .signedOut }
                : [try context.selectedAccount().account]
            var reports: [AccountReport] = []
            var firstError: OStackError?
            let showProgress = !context.global.json && ProcessEnvironment.isTerminal(STDERR_FILENO)
            for account in accounts {
                var report = AccountReport(
                    id: account.id.rawValue, alias: account.alias, pushed: 0, pulled: 0, deleted: 0, failed: 0,
                    conflicts: 0, ok: false)
                do throws(OStackError) {
                    let service = try context.dataService(account)
                    let terminal = context.terminal
                    var progress: (@Sendable (String, Int) -> Void)?
                    if showProgress {
                        progress = { object, done in terminal.err("\r\u{1B}[2Kpulling \(object): \(done) records") }
                    }
                    let result = try service.sync(
                        push: !pullOnly, pull: !pushOnly, reconcile: reconcile, progress: progress)
                    if showProgress { context.terminal.err("\r\u{1B}[2K") }
                    report.pushed = result.pushed
                    report.pulled = result.pulled
                    report.deleted = result.deleted
                    report.failed = result.failed
                    report.conflicts = result.conflicts
                    report.ok = result.ok
                    if let error = result.error {
                        firstError = firstError ?? error
                        report.error = error.code.rawValue
                    } else if result.conflicts > 0 {
                        firstError =
                            firstError
                            ?? OStackError(.conflict, context: .init(account: account.alias), detail: "sync conflicts")
                    } else if result.failed > 0 {
                        firstError =
                            firstError
                            ?? OStackError(
                                .serverError, context: .init(account: account.alias, count: result.failed),
                                detail: "failed entries")
                    }
                } catch {
                    report.error = error.code.rawValue
                    firstError = firstError ?? error
                }
                reports.append(report)
            }
            struct Document: Encodable { var accounts: [AccountReport] }
            context.emit(json: Document(accounts: reports)) {
                reports.map { report in
                    var line = "\(report.alias): pushed \(report.pushed), pulled \(report.pulled)"
                    if report.deleted > 0 { line += ", removed \(report.deleted)" }
                    if report.failed > 0 { line += ", \(report.failed) failed" }
                    if report.conflicts > 0 { line += ", \(report.conflicts) in conflict" }
                    if let error = report.error { line += " — not synced (\(error))" }
                    return line
                }.joined(separator: "\n")
            }
            return firstError
        }
    }

    struct Track: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Mirror an object locally (pulled by `sync`).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object, e.g. task.") var object: String

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let service = try context.dataService(context.selectedAccount().account)
                let schema = try service.track(object)
                struct Document: Encodable { var tracked: String }
                context.emit(
                    json: Document(tracked: schema.name), human: "Tracking \(schema.name); `ostack sync` pulls it.")
            }
        }
    }

    struct Untrack: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop mirroring an object (queued changes are kept).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object.") var object: String

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let service = try context.dataService(context.selectedAccount().account)
                try service.store.untrack(object)
                struct Document: Encodable { var untracked: String }
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
                let service = try context.dataService(account)
                struct Object: Encodable {
                    var name: String
                    var records: Int
                    var lastPullAt: Date?
                }
                struct Document: Encodable {
                    var account: String
                    var objects: [Object]
                    var queue: LocalStore.QueueCounts
                    var lastSyncAt: Date?
                }
                let objects = try service.store.trackedObjects().map { (name) throws(OStackError) -> Object in
                    Object(
                        name: name, records: try service.store.recordCount(name),
                        lastPullAt: try service.store.trackState(name)?.lastPullAt.map {
                            Date(timeIntervalSince1970: $0)
                        })
                }
                let document = Document(
                    account: account.alias, objects: objects, queue: try service.store.counts(),
                    lastSyncAt: try service.lastSyncAt())
                context.emit(json: document) {
                    var text = "account  \(account.alias)\n"
                    text +=
                        "queue    \(document.queue.pending) pending, \(document.queue.failed) failed, \(document.queue.conflict) in conflict\n"
                    text +=
                        "synced   \(document.lastSyncAt.map { RecordText.age(Date().timeIntervalSince($0)) + " ago" } ?? "never")\n"
                    if objects.isEmpty { return text + "No tracked objects (`ostack sync track OBJECT`)." }
                    return text + "\n"
                        + Table(
                            headers: ["object", "records", "pulled"],
                            rows: objects.map {
                                [
                                    $0.name, String($0.records),
                                    $0.lastPullAt.map { RecordText.age(Date().timeIntervalSince($0)) + " ago" }
                                        ?? "never",
                                ]
                            }
                        ).render(terminal: context.terminal)
                }
            }
        }
    }
}

/// `ostack queue list|retry|discard` (SPEC §8).
struct QueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue", abstract: "Inspect and manage queued changes.",
        subcommands: [List.self, Retry.self, Discard.self])

    struct EntryDocument: Encodable {
        var id, object, recordId, operation, status: String
        var attempts: Int
        var lastError: String?
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List queued changes.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let service = try context.dataService(context.selectedAccount().account)
                let entries = try service.store.entries().map {
                    EntryDocument(
                        id: $0.id, object: $0.object, recordId: $0.recordID, operation: $0.operation.rawValue,
                        status: $0.status.rawValue,
                        attempts: $0.attempts, lastError: $0.lastError)
                }
                struct Document: Encodable { var entries: [EntryDocument] }
                context.emit(json: Document(entries: entries)) {
                    entries.isEmpty
                        ? "The queue is empty."
                        : Table(
                            headers: ["id", "object", "record", "operation", "status", "attempts", "last error"],
                            rows: entries.map {
                                [
                                    $0.id, $0.object, $0.recordId, $0.operation, $0.status, String($0.attempts),
                                    $0.lastError ?? "",
                                ]
                            }
                        ).render(terminal: context.terminal)
                }
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make failed changes due again (then run `ostack sync`).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Entry ids (default: every failed entry).") var ids: [String] = []

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let service = try context.dataService(context.selectedAccount().account)
                let count = try service.store.retry(ids: ids.isEmpty ? nil : ids)
                try? service.writeStateSummary()
                struct Document: Encodable { var retried: Int }
                context.emit(
                    json: Document(retried: count),
                    human: "\(count) entr\(count == 1 ? "y" : "ies") will be retried by the next sync.")
            }
        }
    }

    struct Discard: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Drop a queued change and restore the record as last synced.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The entry id (see `ostack queue list`).") var id: String

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let service = try context.dataService(context.selectedAccount().account)
                guard let entry = try service.store.entry(id) else {
                    throw OStackError(.notFound, detail: "no such queue entry")
                }
                // Under the sync lock, so no push is sending it at this moment.
                try service.withSyncLock { () throws(OStackError) in
                    guard let current = try service.store.entry(id), current.status != .inProgress else {
                        throw OStackError(.notFound, detail: "entry gone or being pushed")
                    }
                    try service.store.discard(current)
                }
                service.refreshMirror(entry.object, id: entry.recordID)
                try service.audit.append(
                    "queue.discard", details: ["object": entry.object, "operation": entry.operation.rawValue])
                service.audit.anchor()
                try? service.writeStateSummary()
                struct Document: Encodable { var discarded: String }
                context.emit(json: Document(discarded: id), human: "Discarded \(id).")
            }
        }
    }
}

/// `ostack conflicts list|show|resolve ID --keep mine|theirs` (SPEC §8).
struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts", abstract: "Review and resolve sync conflicts.",
        subcommands: [List.self, Show.self, Resolve.self])

    struct FieldDocument: Encodable {
        var name: String
        var base: JSONValue?
        var mine: JSONValue?
        var theirs: JSONValue?

        /// Every key present (SPEC §9.1): an absent value is an explicit null.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(base ?? .null, forKey: .base)
            try container.encode(mine ?? .null, forKey: .mine)
            try container.encode(theirs ?? .null, forKey: .theirs)
        }

        enum CodingKeys: String, CodingKey { case name, base, mine, theirs }
    }

    struct ConflictDocument: Encodable {
        var id, object, recordId, operation: String
        var fields: [FieldDocument]
    }

    static func document(_ entry: QueueEntry) -> ConflictDocument {
        let base = entry.baseSnapshot ?? [:]
        let theirs = entry.theirs ?? [:]
        let mine = entry.operation == .delete ? [:] : (entry.payload ?? [:])
        let merge = ThreeWayMerge(base: base, mine: mine, theirs: theirs)
        let names = Set(merge.localChanges.keys).union(merge.remoteChanges).sorted()
        return ConflictDocument(
            id: entry.id, object: entry.object, recordId: entry.recordID, operation: entry.operation.rawValue,
            fields: names.map { name in
                FieldDocument(
                    name: name, base: base[name], mine: entry.operation == .delete ? nil : (mine[name] ?? base[name]),
                    theirs: theirs[name])
            })
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List conflicts.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let service = try context.dataService(context.selectedAccount().account)
                let conflicts = try service.store.entries(statuses: [.conflict]).map(ConflictsCommand.document)
                struct Document: Encodable { var conflicts: [ConflictDocument] }
                context.emit(json: Document(conflicts: conflicts)) {
                    conflicts.isEmpty
                        ? "No conflicts."
                        : Table(
                            headers: ["id", "object", "record", "change", "fields"],
                            rows: conflicts.map {
                                [
                                    $0.id, $0.object, $0.recordId, $0.operation,
                                    $0.fields.map(\.name).joined(separator: ","),
                                ]
                            }
                        ).render(terminal: context.terminal)
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show base, mine and theirs per field.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The conflict id.") var id: String

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let service = try context.dataService(context.selectedAccount().account)
                guard let entry = try service.store.entry(id), entry.status == .conflict else {
                    throw OStackError(.notFound, detail: "no such conflict")
                }
                let conflict = ConflictsCommand.document(entry)
                struct Document: Encodable { var conflicts: [ConflictDocument] }
                context.emit(json: Document(conflicts: [conflict])) {
                    "\(conflict.object) \(conflict.recordId) (\(conflict.operation))\n"
                        + Table(
                            headers: ["field", "base", "mine", "theirs"],
                            rows: conflict.fields.map { field in
                                [
                                    field.name, RecordText.text(field.base ?? .null),
                                    conflict.operation == "delete" ? "(deleted)" : RecordText.text(field.mine ?? .null),
                                    RecordText.text(field.theirs ?? .null),
                                ]
                            }
                        ).render(terminal: context.terminal)
                }
            }
        }
    }

    struct Resolve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resolve a conflict by keeping one side.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The conflict id.") var id: String
        @Option(
            name: .long,
            help: "mine: send your change again over the server's version; theirs: adopt the server's record.")
        var keep: Side

        enum Side: String, ExpressibleByArgument, CaseIterable { case mine, theirs }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let service = try context.dataService(context.selectedAccount().account)
                guard let entry = try service.store.entry(id), entry.status == .conflict else {
                    throw OStackError(.notFound, detail: "no such conflict")
                }
                try service.withSyncLock { () throws(OStackError) in
                    guard let current = try service.store.entry(id), current.status == .conflict else {
                        throw OStackError(.notFound, detail: "no such conflict")
                    }
                    try service.engine().resolve(current, keepMine: keep == .mine)
                }
                if keep == .theirs { service.refreshMirror(entry.object, id: entry.recordID) }
                try service.audit.append("conflict.resolved", details: ["object": entry.object, "keep": keep.rawValue])
                service.audit.anchor()
                try? service.writeStateSummary()
                var queued = false
                if keep == .mine {
                    let report = try service.sync(push: true, pull: false)
                    queued = try service.store.entry(id) != nil
                    if let error = report.error {
                        context.note("Kept your change; it is queued and `ostack sync` pushes it.")
                        throw error
                    }
                }
                struct Document: Encodable {
                    var resolved: String
                    var kept: String
                    var queued: Bool
                }
                context.emit(
                    json: Document(resolved: id, kept: keep.rawValue, queued: queued),
                    human: keep == .mine
                        ? (queued ? "Kept your change; it is still queued." : "Kept your change; it is on the server.")
                        : "Adopted the server's record; your change was dropped.")
            }
        }
    }
}
