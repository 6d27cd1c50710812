import ArgumentParser
import OStackCore

/// `ostack queue list|retry|discard` (docs/sync.md, "The queue").
struct QueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue", abstract: "Inspect and manage queued changes.",
        subcommands: [List.self, Retry.self, Discard.self])

    struct EntryDocument: Encodable {
        var id, object, recordId, operation, status: String
        var attempts: Int
        /// Null when there is none (a key every entry carries, as docs/commands.md lists them).
        var lastError: JSONValue
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List queued changes.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let entries = try context.selectedSession().sync.queue().map {
                    EntryDocument(
                        id: $0.id, object: $0.object, recordId: $0.recordID, operation: $0.operation.rawValue,
                        status: $0.status.rawValue, attempts: $0.attempts,
                        lastError: ($0.status == .conflict ? "conflict" : $0.failure?.summary).map(JSONValue.string)
                            ?? .null)
                }
                struct Document: Encodable { var entries: [EntryDocument] }
                context.emit(json: Document(entries: entries)) {
                    Table(
                        headers: ["id", "object", "record", "operation", "status", "attempts", "last error"],
                        rows: entries.map {
                            [
                                $0.id, $0.object, $0.recordId, $0.operation, $0.status, String($0.attempts),
                                $0.lastError.stringValue ?? "",
                            ]
                        }
                    ).render(terminal: context.terminal, whenEmpty: "The queue is empty.")
                }
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "retry",
            abstract: "Make failed changes due again (then run `ostack sync`).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Entry ids (default: every failed entry).", completion: ShellCompletions.queueEntries) var ids:
            [String] = []

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let count = try context.selectedSession().sync.retry(ids: ids.isEmpty ? nil : ids)
                struct Document: Encodable { var retried: Int }
                context.emit(
                    json: Document(retried: count),
                    human: "\(count) entr\(count == 1 ? "y" : "ies") will be retried by the next sync.")
            }
        }
    }

    struct Discard: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "discard",
            abstract: "Drop a queued change and restore the record as last synced.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The entry id (see `ostack queue list`).", completion: ShellCompletions.queueEntries) var id:
            String
        @Flag(name: [.customShort("y"), .long], help: "Do not ask for confirmation on a terminal.") var yes = false

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let session = try context.selectedSession()
                try context.confirm("Drop the queued change \(id)? It is lost.", yes: yes)
                try session.sync.discard(id)
                struct Document: Encodable { var discarded: String }
                context.emit(json: Document(discarded: id), human: "Discarded \(id).")
            }
        }
    }
}
