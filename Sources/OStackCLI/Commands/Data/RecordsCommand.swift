import ArgumentParser
import FoundationEssentials
import OStackCore
import PlatformKit

/// `ostack records list|get|create|update|delete` (docs/sync.md, "Records"; docs/filters.md). Writes are local-first: one local
/// transaction (record + queue entry), then pushed at once unless `--offline`.
struct RecordsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "records", abstract: "Read and change records.",
        subcommands: [List.self, Get.self, Create.self, Update.self, Delete.self, Export.self, Import.self])

    struct SourceOptions: ParsableArguments {
        @Flag(name: .long, help: "Read the local mirror only.") var local = false
        @Flag(name: .long, help: "Ask the server, even for a tracked object.") var remote = false

        func validate() throws {
            if local && remote { throw ValidationError("Pass --local or --remote, not both.") }
        }

        var source: RecordSource? { local ? .local : (remote ? .remote : nil) }
    }

    struct WriteOptions: ParsableArguments {
        // Values may start with `-` (`--set note=-5`, `--sort -updated_at`): the next word is the value.
        @Option(
            name: .long, parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Set a field (typed by metadata); repeatable.", valueName: "field=value"))
        var set: [String] = []
        @Option(
            name: .long, parsing: .unconditional,
            help: ArgumentHelp("Fields as a JSON object, @file.json, or @- for stdin.", valueName: "json"))
        var data: String?
        @Flag(name: .long, help: "Save and queue the change without contacting the server.") var offline = false
        @Flag(
            name: .customLong("require-online"),
            help: "Fail (exit 5) when the change could not be delivered now; it stays saved and queued.")
        var requireOnline = false

        func validate() throws {
            if offline && requireOnline { throw ValidationError("Pass --offline or --require-online, not both.") }
        }

        /// `--data`, read (a file or pipe gives its bytes once) and parsed once; nil without it.
        func dataValue() throws(OStackError) -> JSONValue? {
            guard let data else { return nil }
            let bytes = try bytes(data)
            let (parsed, repeated) = JSONValue.parseNamingRepeats(bytes)
            guard let value = parsed else {
                throw OStackError(
                    .invalidInput, context: .init(suggestion: .text("--data \(JSONValue.refusal(bytes)).")),
                    detail: "--data json")
            }
            if let name = repeated {
                throw OStackError(
                    .invalidInput,
                    context: .init(suggestion: .text("--data names '\(name)' twice in one object: keep one.")),
                    detail: "--data repeated name")
            }
            return value
        }

        /// `--data` holding a JSON array: several records (create only).
        func batch(_ value: JSONValue?) throws(OStackError) -> [[String: JSONValue]]? {
            guard set.isEmpty, case .array(let items)? = value else { return nil }
            let objects = items.compactMap(\.objectValue)
            guard objects.count == items.count, !objects.isEmpty else {
                throw OStackError(
                    .invalidInput, context: .init(suggestion: "--data takes a JSON object or an array of objects."),
                    detail: "--data array")
            }
            return objects
        }

        func bytes(_ data: String) throws(OStackError) -> [UInt8] {
            guard data.hasPrefix("@") else { return Array(data.utf8) }
            if data == "@-" {
                return try StandardInput.readAllOnce()
            }
            return try APIRequest.readFile(String(data.dropFirst()))
        }

        func fields(_ session: AccountSession, object: String, data value: JSONValue?) throws(OStackError)
            -> [String: JSONValue]
        {
            var fields: [String: JSONValue] = [:]
            if data != nil {
                guard let object = value?.objectValue else {
                    throw OStackError(
                        .invalidInput, context: .init(suggestion: "--data takes a JSON object."), detail: "--data json")
                }
                fields = object
            }
            let schema = try session.schemaIfAvailable(object)
            var named: Set<String> = []
            for assignment in set {
                guard let equals = assignment.firstIndex(of: "="), equals != assignment.startIndex else {
                    throw OStackError(
                        .invalidInput, context: .init(suggestion: "Use --set field=value."), detail: "--set syntax")
                }
                let name = String(assignment[..<equals])
                let text = String(assignment[assignment.index(after: equals)...])
                // As `--data` naming a field twice: the one kept would be a guess.
                guard named.insert(name).inserted else {
                    throw OStackError(
                        .invalidInput, context: .init(suggestion: .text("--set names '\(name)' twice: keep one.")),
                        detail: "--set repeated name")
                }
                fields[name] =
                    try schema.map { schema throws(OStackError) in
                        try FieldValidator(schema: schema).typedValue(field: name, text: text)
                    } ?? .string(text)
            }
            return fields
        }
    }

    struct WriteDocument: Encodable {
        var object: String
        var id: String
        /// Null after a delete (a key every document carries, as docs/commands.md lists them).
        var record: JSONValue
        var queued: Bool
    }

    /// Prints the result; a change still queued for a reason ends with that reason's exit code —
    /// except that not reaching the server is success: the change is saved and queued, a warning
    /// says so and the exit is 0, unless `requireOnline` (then 5) (docs/errors.md, "Offline writes").
    static func finish(
        _ result: RecordWrites.WriteResult, verb: String, context: CommandContext, requireOnline: Bool = false
    ) throws {
        let document = WriteDocument(
            object: result.object, id: result.id, record: result.record ?? .null, queued: result.queued)
        context.emit(json: document) {
            var text = result.record.map { RecordText.detail($0) } ?? ""
            if !result.queued {
                // The id may be one the server assigned: it goes through the sanitiser like any cell.
                let named =
                    "\(ErrorPresenter.sanitize(result.object)) \(ErrorPresenter.sanitize(result.id, maxLength: 300))"
                text += (text.isEmpty ? "" : "\n") + "\(verb) \(named)."
            }
            return text
        }
        if let older = result.olderFailure { context.warn(older) }
        guard result.queued else { return }
        if var reason = result.reason {
            reason.context.count = 1
            reason.context.savedAndQueued = true
            try settleQueued(reason, context: context, requireOnline: requireOnline)
            return
        }
        // --offline: queued as asked, which is success (the JSON says `"queued": true`).
        context.note("Saved locally and queued (--offline); `ostack sync` pushes it.")
    }

    /// A write that is saved and queued because the server could not be reached is a success with
    /// a warning (exit 0), unless `requireOnline`; any other reason (conflict, refusal, server
    /// error, an answer without proof) is the error it is.
    static func settleQueued(_ reason: OStackError, context: CommandContext, requireOnline: Bool) throws {
        guard [.offline, .timeout].contains(reason.code), !requireOnline else { throw reason }
        context.warn(reason)
    }

    /// The spinner's words while a write waits on the server: it is saved already.
    static func sending(_ session: AccountSession) -> String {
        "Sending to \(session.account.server.authority) — the change is saved (Ctrl-C stops waiting; `ostack sync` sends it later)"
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List records of an object.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object, e.g. task.", completion: ShellCompletions.objects) var object: String
        @Option(name: .long, parsing: .unconditional, help: "A filter, e.g. \"status = 'open' and amount >= 10\".")
        var filter: String?
        @Option(
            name: .customLong("filter-json"), parsing: .unconditional, help: "The filter as the protocol's JSON AST.")
        var filterJSON: String?
        @Option(name: .long, parsing: .unconditional, help: "Sort fields, e.g. -updated_at or status,-amount.")
        var sort: String?
        // `.unconditional`: `--limit -1` is a negative limit (refused as such), not a missing value.
        @Option(name: .long, parsing: .unconditional, help: "At most this many records (default 30).") var limit: Int?
        @Flag(name: .long, help: "All records (no limit).") var all = false
        @Option(name: .long, parsing: .unconditional, help: "Skip this many records.") var offset: Int = 0
        @Option(name: .long, parsing: .unconditional, help: "Only these fields, e.g. title,status.") var fields: String?
        @OptionGroup var source: SourceOptions

        func validate() throws {
            if filter != nil && filterJSON != nil { throw ValidationError("Pass --filter or --filter-json, not both.") }
            if let limit, limit < 0 { throw ValidationError("--limit must not be negative.") }
            if all && limit != nil { throw ValidationError("Pass --limit or --all, not both.") }
            if offset < 0 { throw ValidationError("--offset must not be negative.") }
        }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let session = try context.selectedSession()
                var request = RecordReads.ListRequest(object: object)
                if let filter {
                    try request.setFilter(filter)
                } else if let filterJSON {
                    guard let json = JSONValue.parse(Array(filterJSON.utf8)) else {
                        throw OStackError(
                            .invalidFilter,
                            context: .init(suggestion: .text("--filter-json \(JSONValue.refusal(Array(filterJSON.utf8))).")),
                            detail: "json")
                    }
                    request.filter = try FilterCondition.parse(json)
                    request.wireFilter = json
                }
                if let sort { request.sort = try SortKey.parse(sort) }
                request.limit = all ? nil : (limit ?? Self.defaultLimit)
                request.offset = offset
                request.fields = fields.map { $0.split(separator: ",").map { String($0).trimmingWhitespace() } }
                request.source = source.source
                let remote = try session.reads.source(for: request) == .remote
                // Cached by now when the server could be asked (`source(for:)` checks the request against it).
                let schema = session.metadata.cachedSchema(object)
                if remote {
                    let (shown, total) = try Self.listRemote(
                        request, schema: schema, reads: session.reads, context: context)
                    showing(shown, of: total, limit: request.limit, context: context)
                    return
                }
                let result = try session.reads.list(request)
                if result.source == .local {
                    if !result.tracked {
                        context.note("\(object) is not tracked: the local mirror holds only records changed here.")
                    } else if let pulled = result.lastPullAt {
                        context.note(
                            "Local mirror, pulled \(RecordText.age(Date().timeIntervalSince1970 - pulled)) ago.")
                    } else {
                        context.note("Local mirror, never pulled: run `ostack sync`.")
                    }
                }
                struct Document: Encodable {
                    var object: String
                    var source: String
                    var records: [JSONValue]
                    var total: Int?
                }
                if !context.global.json && !result.records.isEmpty { context.page() }
                if context.global.format == .ndjson {  // one record per line, as `records export` writes them
                    for record in result.records { context.terminal.out(JSONOutput.encode(record) + "\n") }
                    return
                }
                context.emit(
                    json: Document(
                        object: object, source: result.source.rawValue, records: result.records, total: result.total)
                ) {
                    RecordText.table(result.records, fields: request.fields, schema: schema, terminal: context.terminal)
                }
                showing(result.records.count, of: result.total, limit: request.limit, context: context)
            }
        }

        static let defaultLimit = 30

        /// After a list cut short by its limit, on stderr: "Showing 30 of 50000 — use --limit or --all.";
        /// after an offset, the rows shown by position: "Showing 11–15 of 40 — use --offset, …". (It
        /// said "Showing 5 of 30" there, counting what followed the offset.)
        func showing(_ shown: Int, of total: Int?, limit: Int?, context: CommandContext) {
            guard let limit, shown == limit, total.map({ $0 > offset + shown }) ?? (shown > 0) else { return }
            let of = total.map { " of \($0)" } ?? ""
            let line =
                offset == 0
                ? "Showing \(shown)\(of) — use --limit or --all."
                : "Showing \(offset + 1)–\(offset + shown)\(of) — use --offset, --limit or --all."
            context.note(context.terminal.dim(line))
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "get", abstract: "Show one record.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object.", completion: ShellCompletions.objects) var object: String
        @Argument(help: "The record id.") var id: String
        @OptionGroup var source: SourceOptions

        func validate() throws {
            if id.isEmpty { throw ValidationError("The record id must not be empty.") }
        }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let (record, _, pending) = try context.selectedSession().reads.get(
                    object, id: id, source: source.source)
                context.emit(json: WriteDocument(object: object, id: id, record: record, queued: pending)) {
                    RecordText.detail(record) + (pending ? "\n(has local changes not yet on the server)" : "")
                }
            }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create", abstract: "Create a record.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object.", completion: ShellCompletions.objects) var object: String
        @OptionGroup var write: WriteOptions

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let session = try context.selectedSession()
                // Read once: a pipe (`--data @/dev/stdin`) gives its bytes once.
                let data = try write.dataValue()
                if let batch = try write.batch(data) {
                    let (results, reason) = try Spinner.around(context, RecordsCommand.sending(session)) {
                        () throws(OStackError) in
                        try session.writes.createMany(object, data: batch, offline: write.offline)
                    }
                    // Rows the server refused were undone: not listed as records, each named by its
                    // place in the input (1-based) with the presenter's words for its refusal.
                    let refused = results.enumerated().compactMap { row, result in
                        result.refusal.map { (row: row + 1, error: $0) }
                    }
                    let kept = results.filter { $0.refusal == nil }
                    let queued = kept.filter(\.queued).count
                    struct Refusal: Encodable {
                        var row: Int
                        var code: String
                        var message: String
                    }
                    struct Document: Encodable {
                        var records: [WriteDocument]
                        var refused: [Refusal]
                    }
                    let presenter = ErrorPresenter()
                    let refusals = refused.map { row, error in
                        let shown = presenter.present(error, referenceID: "-")
                        return Refusal(row: row, code: shown.code, message: shown.message)
                    }
                    context.emit(
                        json: Document(
                            records: kept.map {
                                WriteDocument(
                                    object: $0.object, id: $0.id, record: $0.record ?? .null, queued: $0.queued)
                            }, refused: refusals),
                        human: kept.isEmpty && !refused.isEmpty
                            ? ""
                            : "Created \(kept.count) \(object) record\(kept.count == 1 ? "" : "s")\(queued > 0 ? " (\(queued) queued)" : "")."
                    )
                    for refusal in refusals.prefix(50) {
                        context.note("Row \(refusal.row) was not created: \(refusal.message)")
                    }
                    if refusals.count > 50 { context.note("… and \(refusals.count - 50) more rows were not created.") }
                    if !refused.isEmpty {
                        // Why the others are still queued, as a warning: the refusal decides the exit.
                        if var reason {
                            reason.context.savedAndQueued = true
                            context.warn(reason)
                        }
                        var fields: [String] = []
                        for field in refused.flatMap({ $0.error.context.fields }) where !fields.contains(field) {
                            fields.append(field)
                        }
                        let rows = refused.count == 1 ? "that row" : "those rows"
                        let delivered = kept.count - queued
                        let waiting = queued > 0 ? ", \(queued) saved and queued (`ostack sync` sends them)" : ""
                        let advice =
                            kept.isEmpty
                            ? (results.count == 1
                                ? "Nothing was created; fix the row and run the command again."
                                : "None of the \(results.count) rows was created; fix them and run the command again.")
                            : "\(delivered) of \(results.count) rows were created\(waiting); run the command again with only \(rows), fixed."
                        throw OStackError(
                            .refused,
                            context: .init(
                                object: object, fields: fields, count: refused.count,
                                suggestion: .text(advice)),
                            detail: "bulk create: rows refused")
                    }
                    if var reason {
                        reason.context.savedAndQueued = true
                        try RecordsCommand.settleQueued(reason, context: context, requireOnline: write.requireOnline)
                    }
                    return
                }
                let fields = try write.fields(session, object: object, data: data)
                let result = try Spinner.around(context, RecordsCommand.sending(session)) { () throws(OStackError) in
                    try session.writes.create(object, data: fields, offline: write.offline)
                }
                try RecordsCommand.finish(result, verb: "Created", context: context, requireOnline: write.requireOnline)
            }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "update", abstract: "Change fields of a record.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object.", completion: ShellCompletions.objects) var object: String
        @Argument(help: "The record id.") var id: String
        @OptionGroup var write: WriteOptions

        func validate() throws {
            if id.isEmpty { throw ValidationError("The record id must not be empty.") }
        }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let session = try context.selectedSession()
                let fields = try write.fields(session, object: object, data: try write.dataValue())
                guard !fields.isEmpty else {
                    throw OStackError(
                        .invalidInput, context: .init(suggestion: "Give fields with --set or --data."),
                        detail: "no fields")
                }
                let result = try Spinner.around(context, RecordsCommand.sending(session)) { () throws(OStackError) in
                    try session.writes.update(object, id: id, changes: fields, offline: write.offline)
                }
                try RecordsCommand.finish(result, verb: "Updated", context: context, requireOnline: write.requireOnline)
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a record.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object.", completion: ShellCompletions.objects) var object: String
        @Argument(help: "The record id.") var id: String
        @Flag(name: .long, help: "Save and queue the deletion without contacting the server.") var offline = false
        @Flag(
            name: .customLong("require-online"),
            help: "Fail (exit 5) when the deletion could not be delivered now; it stays saved and queued.")
        var requireOnline = false

        func validate() throws {
            if id.isEmpty { throw ValidationError("The record id must not be empty.") }
            if offline && requireOnline { throw ValidationError("Pass --offline or --require-online, not both.") }
        }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                let session = try context.selectedSession()
                let result = try Spinner.around(context, RecordsCommand.sending(session)) { () throws(OStackError) in
                    try session.writes.delete(object, id: id, offline: offline)
                }
                try RecordsCommand.finish(result, verb: "Deleted", context: context, requireOnline: requireOnline)
            }
        }
    }
}

extension RecordReads.ListRequest {
    /// `--filter EXPR`: the filter language compiled to the protocol's AST, for the server and the mirror.
    mutating func setFilter(_ text: String) throws(OStackError) {
        let expression = try FilterParser.parse(text)
        wireFilter = expression.wireAST
        filter = try FilterCondition.parse(expression.wireAST)
    }
}

/// Human renderings of records: values are user data and printed, after control characters are stripped.
extension RecordsCommand.List {
    /// The server's records, fetched and written page by page so memory stays flat however many
    /// there are (docs/sync.md, "Remote lists"). `--json` writes the same document as for a local
    /// list, one record at a time; the table keeps only its cells.
    static func listRemote(
        _ request: RecordReads.ListRequest, schema: ObjectSchema?, reads: RecordReads, context: CommandContext
    ) throws -> (shown: Int, total: Int?) {
        let terminal = context.terminal
        if context.global.format == .ndjson {  // one record per line, as `records export` writes them
            var count = 0
            let total = try reads.listRemote(request) { record in
                terminal.out(JSONOutput.encode(record) + "\n")
                count += 1
            }
            return (count, total)
        }
        if context.global.json {
            // Nothing is written before the first record arrives: a list that fails at once leaves
            // stdout empty. (One that fails after records were written leaves them, unterminated,
            // and exits non-zero.)
            let prefix = "{\"object\":" + JSONOutput.encode(request.object) + ",\"records\":["
            var count = 0
            let total = try reads.listRemote(request) { record in
                terminal.out((count > 0 ? "," : prefix) + JSONOutput.encode(record))
                count += 1
            }
            if count == 0 { terminal.out(prefix) }
            terminal.out("],\"source\":\"remote\"" + (total.map { ",\"total\":\($0)" } ?? "") + "}\n")
            return (count, total)
        }
        // The columns come from the first records (as for a local list: the first 50). A line format
        // (`tsv`, `csv`: the default when stdout is not a terminal) is then written row by row as
        // the pages come; the aligned table, which needs every cell's width, keeps its cells.
        let format = terminal.defaultFormat
        let streams = format == .tsv || format == .csv
        var sample: [JSONValue] = []
        var columns: [String]?
        var rows: [[String]] = []
        var written = 0
        func emit(_ chosen: [String], _ cells: [[String]], header: Bool) {
            let table = Table(headers: chosen, rows: cells)
            terminal.out(header ? table.render(as: format, terminal: terminal) : table.renderRows(as: format))
            written += cells.count
        }
        let total = try reads.listRemote(request) { record in
            if let columns {
                let cells = RecordText.cells(record, columns: columns)
                if streams { emit(columns, [cells], header: false) } else { rows.append(cells) }
                return
            }
            sample.append(record)
            if sample.count == 50 {
                let chosen = RecordText.columns(sample, fields: request.fields, schema: schema)
                columns = chosen
                rows = sample.map { RecordText.cells($0, columns: chosen) }
                sample = []
                if streams {
                    emit(chosen, rows, header: true)
                    rows = []
                }
            }
        }
        if columns == nil && !sample.isEmpty {
            let chosen = RecordText.columns(sample, fields: request.fields, schema: schema)
            columns = chosen
            rows = sample.map { RecordText.cells($0, columns: chosen) }
            if streams {
                emit(chosen, rows, header: true)
                rows = []
            }
        }
        if streams { return (written, total) }
        guard let columns, !rows.isEmpty else {
            if format == .table { terminal.out("No records.\n") }
            return (0, total)
        }
        context.page()
        terminal.out(Table(headers: columns, rows: rows).render(terminal: terminal))
        return (rows.count, total)
    }
}

enum RecordText {
    static func text(_ value: JSONValue) -> String {
        switch value {
        case .null: ""
        case .bool(let flag): flag ? "true" : "false"
        case .number(let number): FieldValidator.format(number)
        case .string(let text): text
        case .array, .object: String(decoding: value.serialized(), as: UTF8.self)
        }
    }

    static func detail(_ record: JSONValue) -> String {
        guard let members = record.objectValue else { return "" }
        let keys = members.keys.sorted { ($0 == "id" ? "" : $0) < ($1 == "id" ? "" : $1) }
        let width = keys.map(\.count).max() ?? 0
        return keys.map { key in
            ErrorPresenter.sanitize(key) + String(repeating: " ", count: width - key.count) + "  "
                + ErrorPresenter.sanitize(text(members[key]!), maxLength: 500)
        }.joined(separator: "\n") + "\n"
    }

    static func table(_ records: [JSONValue], fields: [String]?, schema: ObjectSchema?, terminal: Terminal) -> String {
        if records.isEmpty { return terminal.defaultFormat == .table ? "No records." : "" }
        let columns = columns(records, fields: fields, schema: schema)
        return Table(headers: columns, rows: records.map { cells($0, columns: columns) }).render(terminal: terminal)
    }

    /// A table's cells for one record.
    static func cells(_ record: JSONValue, columns: [String]) -> [String] {
        columns.map { text(record[$0] ?? .null) }
    }

    /// The columns of a records table: `id`, then the fields asked for; else up to five fields seen
    /// in the first 50 records in metadata order (the order the object's author defined them;
    /// fields metadata does not know follow by name), then the system column `updated_at`. The
    /// same data always gives the same columns.
    static func columns(_ records: [JSONValue], fields: [String]?, schema: ObjectSchema? = nil) -> [String] {
        if let fields { return ["id"] + fields.filter { $0 != "id" } }
        var seen = Set<String>()
        for record in records.prefix(50) { seen.formUnion((record.objectValue ?? [:]).keys) }
        let system = Set(ObjectSchema.systemFields)
        var columns = (schema?.fields ?? []).map(\.name).filter { seen.contains($0) && !system.contains($0) }
        let known = Set(columns)
        columns += seen.filter { !known.contains($0) && !system.contains($0) }.sorted()
        return ["id"] + columns.prefix(5) + ["updated_at"]
    }

    static func age(_ seconds: Double) -> String {
        switch seconds {
        case ..<90: "\(max(0, Int(seconds))) s"
        case ..<5400: "\(Int(seconds / 60)) min"
        case ..<172_800: "\(Int(seconds / 3600)) h"
        default: "\(Int(seconds / 86400)) days"
        }
    }
}
