import ArgumentParser
import OStackCore

/// `ostack conflicts list|show|resolve ID --keep mine|theirs` (docs/sync.md, "Conflicts").
struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts", abstract: "Review and resolve sync conflicts.",
        subcommands: [List.self, Show.self, Resolve.self])

    struct FieldDocument: Encodable {
        var name: String
        var base: JSONValue?
        var mine: JSONValue?
        var theirs: JSONValue?

        /// Every key present (docs/commands.md#json-output): an absent value is an explicit null.
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

    static func document(_ conflict: Conflict) -> ConflictDocument {
        ConflictDocument(
            id: conflict.id, object: conflict.object, recordId: conflict.recordID,
            operation: conflict.operation.rawValue,
            fields: conflict.fields.map {
                FieldDocument(name: $0.name, base: $0.base, mine: $0.mine, theirs: $0.theirs)
            })
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List conflicts.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let conflicts = try context.selectedSession().sync.conflicts().map(ConflictsCommand.document)
                struct Document: Encodable { var conflicts: [ConflictDocument] }
                context.emit(json: Document(conflicts: conflicts)) {
                    Table(
                        headers: ["id", "object", "record", "change", "fields"],
                        rows: conflicts.map {
                            [
                                $0.id, $0.object, $0.recordId, $0.operation,
                                $0.fields.map(\.name).joined(separator: ","),
                            ]
                        }
                    ).render(terminal: context.terminal, whenEmpty: "No conflicts.")
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "Show base, mine and theirs per field.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The conflict id.", completion: ShellCompletions.conflicts) var id: String

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let conflict = ConflictsCommand.document(try context.selectedSession().sync.conflict(id))
                struct Document: Encodable { var conflict: ConflictDocument }
                context.emit(json: Document(conflict: conflict)) {
                    "\(ErrorPresenter.sanitize(conflict.object)) \(ErrorPresenter.sanitize(conflict.recordId, maxLength: 300))"
                        + " (\(conflict.operation))\n"
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
        static let configuration = CommandConfiguration(
            commandName: "resolve", abstract: "Resolve a conflict by keeping one side.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The conflict id.", completion: ShellCompletions.conflicts) var id: String
        @Option(
            name: .long,
            help: "mine: send your change again over the server's version; theirs: adopt the server's record.")
        var keep: Side

        enum Side: String, ExpressibleByArgument, CaseIterable { case mine, theirs }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let resolution = try context.selectedSession().sync.resolve(id, keepMine: keep == .mine)
                if let error = resolution.error {
                    context.note("Kept your change; it is still queued.")
                    throw error
                }
                struct Document: Encodable {
                    var resolved: String
                    var kept: String
                    var queued: Bool
                    /// Later changes of the record, queued behind the one resolved, dropped with it.
                    var droppedLater: Int
                }
                let later =
                    resolution.dropped == 0
                    ? "" : " and \(resolution.dropped) later change\(resolution.dropped == 1 ? "" : "s") to the record"
                context.emit(
                    json: Document(
                        resolved: id, kept: keep.rawValue, queued: resolution.queued, droppedLater: resolution.dropped),
                    human: keep == .mine
                        ? (resolution.queued
                            ? "Kept your change; it is still queued." : "Kept your change; it is on the server.")
                        : "Adopted the server's record; your change\(later) \(resolution.dropped == 0 ? "was" : "were") dropped.")
            }
        }
    }
}
