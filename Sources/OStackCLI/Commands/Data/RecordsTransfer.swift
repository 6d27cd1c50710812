import ArgumentParser
import Glibc
import OStackCore
import PlatformKit

/// `records export` and `records import` (docs/commands.md, "Export and import").
extension RecordsCommand {
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Write every record of an object as CSV, JSON or NDJSON (--format), streaming.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object, e.g. task.", completion: ShellCompletions.objects) var object: String
        @Option(name: .long, parsing: .unconditional, help: "Only records matching this filter.") var filter: String?
        @Option(name: .long, parsing: .unconditional, help: "Only these fields (id always), e.g. title,status.")
        var fields: String?
        @Option(
            name: .long, help: ArgumentHelp("Write to this new file (mode 0600) instead of stdout.", valueName: "file"))
        var output: String?
        @OptionGroup var source: SourceOptions

        /// A format export does not write is a usage error (exit 64), like any other wrong option
        /// value (it was `invalid-input`, exit 9).
        func validate() throws {
            if let format = global.format, ![.csv, .json, .ndjson].contains(format) {
                throw ValidationError("records export writes --format csv, json or ndjson.")
            }
        }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                // The export is written as it streams: there is no document for --jq or --template.
                guard global.jq == nil && global.template == nil else {
                    throw OStackError(
                        .invalidInput,
                        context: .init(
                            suggestion: "records export streams its records: use --format ndjson and pipe it to jq."),
                        detail: "export filter")
                }
                let format = global.format ?? (global.json ? .json : .csv)
                let session = try context.selectedSession()
                var request = RecordReads.ListRequest(object: object)
                if let filter { try request.setFilter(filter) }
                request.fields = fields.map { $0.split(separator: ",").map { String($0).trimmingWhitespace() } }
                request.source = source.source
                let remote = try session.reads.source(for: request) == .remote
                // As `records list`: an untracked object's mirror holds only what was changed here.
                if !remote, try !session.store.isTracked(object) {
                    context.note("\(object) is not tracked: the local mirror holds only records changed here.")
                }
                let schema = session.metadata.cachedSchema(object)
                let sink = try ExportSink(path: output, format: format, columns: request.fields.map { ["id"] + $0 })
                defer { sink.close() }
                let line = ProgressLine.make(context: context)
                var count = 0
                let each = { (record: JSONValue) throws(OStackError) in
                    try sink.write(record, schema: schema)
                    count += 1
                    if count % 500 == 0 {
                        line?.update(label: "exporting \(object)", done: count, total: nil, unit: "records")
                    }
                }
                if remote {
                    _ = try session.reads.listRemote(request, each: each)
                } else {
                    try session.reads.eachLocalJSON(object, filter: request.filter) { (bytes) throws(OStackError) in
                        // Straight from the stored text where it can be (no decoding); else as a value.
                        // (CSV reads only its columns, `--fields` or not; JSON keeps every field.)
                        if request.fields == nil || format == .csv, try sink.write(json: bytes, schema: schema) {
                            count += 1
                            if count % 500 == 0 {
                                line?.update(label: "exporting \(object)", done: count, total: nil, unit: "records")
                            }
                            return true
                        }
                        guard let record = JSONValue.parse(bytes) else { return false }
                        try each(RecordReads.select(record, request.fields))
                        return true
                    }
                }
                try sink.finish()
                line?.clear()
                if output != nil {
                    context.note(
                        "Exported \(count) \(object) record\(count == 1 ? "" : "s") from the \(remote ? "server" : "local mirror")."
                    )
                }
            }
        }
    }
}

/// Where an export goes: stdout or a new private file, written in 64 KiB blocks. CSV gets its header
/// from the first record (or `--fields`); what goes to a terminal is sanitised, what goes to a file
/// or a pipe is exact.
///
/// A file appears under its name only complete: the records go to `<path>.partial-<random>` beside
/// it, which `finish` links to the name (a link never replaces a file that exists) and a failure or
/// an interrupt removes (`PartialFile`). An export that stops half-way (a failed page, a full disk) leaves no file that looks
/// whole and could be imported as if it were.
final class ExportSink {
    let fd: Int32
    let format: OutputFormat
    let sanitize: Bool
    let ownsFile: Bool
    /// The name asked for and the file written meanwhile (nil for stdout).
    let destination: (path: String, partial: String)?
    var columns: [String]?
    var buffer: [UInt8] = []
    var count = 0

    init(path: String?, format: OutputFormat, columns: [String]?) throws(OStackError) {
        self.format = format
        self.columns = columns
        if let path {
            let partial = PartialFile.name(for: path)
            var exists = stat()
            guard lstat(path, &exists) != 0 else { throw Self.cannotCreate(path, errno: EEXIST) }
            let opened = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard opened >= 0 else { throw Self.cannotCreate(path, errno: errno) }
            fd = opened
            ownsFile = true
            sanitize = false
            destination = (path, partial)
            PartialFile.guardUntilReleased(partial)
        } else {
            fd = STDOUT_FILENO
            ownsFile = false
            sanitize = ProcessEnvironment.isTerminal(STDOUT_FILENO)
            destination = nil
        }
    }

    /// Why `path` cannot be created, as far as `errno` says (it was "it exists or the directory is
    /// not writable" for a directory that does not exist, too).
    static func cannotCreate(_ path: String, errno: Int32) -> OStackError {
        let reason =
            switch errno {
            case EEXIST: "it exists. Nothing was overwritten."
            case ENOENT: "its directory does not exist."
            case ENOTDIR: "a part of its directory is not a directory."
            case EACCES, EPERM, EROFS: "its directory is not writable."
            case ENOSPC, EDQUOT: "the disk is full."
            default: "the file system refused it."
            }
        return OStackError(
            .invalidInput,
            context: .init(suggestion: .text("Cannot create \(ErrorPresenter.sanitize(path, maxLength: 150)): \(reason)")),
            detail: "export file errno \(errno)")
    }

    /// A record from its stored JSON text, without decoding it: as it is for `json` and `ndjson`
    /// (when it is one line), its fields copied out of the text for `csv`. False when it must go the
    /// slow way (a terminal, which gets sanitised values; CSV cells holding lists or objects; the
    /// first CSV record without metadata, whose keys make the header).
    func write(json bytes: UnsafeRawBufferPointer, schema: ObjectSchema?) throws(OStackError) -> Bool {
        guard !sanitize else { return false }
        switch format {
        case .csv:
            guard let columns else { return false }
            let mark = buffer.count
            if count == 0 { append(header(columns)) }
            guard appendCSVLine(bytes, scanner(columns)) else {
                buffer.removeSubrange(mark...)
                return false
            }
        case .json:
            append(count == 0 ? "[" : ",\n")
            buffer.append(contentsOf: bytes)
        default:
            guard !bytes.contains(UInt8(ascii: "\n")) else { return false }
            buffer.append(contentsOf: bytes)
            buffer.append(UInt8(ascii: "\n"))
        }
        count += 1
        if buffer.count >= 65_536 { try flush() }
        return true
    }

    private var rawValues: [FieldScanner.RawValue] = []
    /// Where a CSV line is put together before it joins `buffer` in one append.
    private let line = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 1)

    deinit { line.deallocate() }

    /// One CSV line straight from the bytes: the same cells `write(_:schema:)` makes from the decoded
    /// record (numbers as `FieldValidator.format`, RFC 4180 quoting), without building strings for
    /// plain text and whole numbers. False (nothing written) for a list or an object, a number the
    /// fast path does not read, or a line longer than 64 KiB: the decoded path takes those.
    private func appendCSVLine(_ bytes: UnsafeRawBufferPointer, _ scanner: FieldScanner) -> Bool {
        var values: [FieldScanner.RawValue] = []
        swap(&values, &rawValues)  // a local while it is used: no exclusivity check per access
        defer { swap(&values, &rawValues) }
        scanner.scanRaw(bytes, into: &values)
        var out = LineWriter(line)
        for index in values.indices {
            if index > 0 { guard out.put(UInt8(ascii: ",")) else { return false } }
            switch values[index] {
            case .missing, .null: break
            case .bool(let flag): guard out.put(flag ? "true" : "false") else { return false }
            case .number(let range):
                let token = UnsafeRawBufferPointer(rebasing: bytes[range])
                if Self.isPlainInteger(token) {
                    guard out.put(token) else { return false }
                } else if let number = Double(String(decoding: token, as: UTF8.self)) {
                    guard out.put(FieldValidator.format(number)) else { return false }
                } else {
                    return false
                }
            case .string(let range, let escaped):
                if range.isEmpty {
                    guard out.put(UInt8(ascii: "\"")), out.put(UInt8(ascii: "\"")) else { return false }
                } else if escaped {
                    let text = FieldScanner.decodeString(bytes, range, escaped: true)
                    guard out.put(Table.csvField(text)) else { return false }
                } else {
                    guard out.putCSVField(UnsafeRawBufferPointer(rebasing: bytes[range])) else { return false }
                }
            case .compound: return false
            }
        }
        guard out.put(UInt8(ascii: "\r")), out.put(UInt8(ascii: "\n")) else { return false }
        buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[..<out.count]))
        return true
    }

    /// Bytes into a fixed buffer; every `put` says whether they fitted.
    private struct LineWriter {
        let base: UnsafeMutableRawPointer
        let capacity: Int
        var count = 0

        init(_ buffer: UnsafeMutableRawBufferPointer) {
            base = buffer.baseAddress!
            capacity = buffer.count
        }

        mutating func put(_ byte: UInt8) -> Bool {
            guard count < capacity else { return false }
            base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
            count += 1
            return true
        }

        mutating func put(_ bytes: UnsafeRawBufferPointer) -> Bool {
            guard bytes.count <= capacity - count else { return false }
            if let source = bytes.baseAddress { (base + count).copyMemory(from: source, byteCount: bytes.count) }
            count += bytes.count
            return true
        }

        mutating func put(_ text: String) -> Bool {
            var text = text
            return text.withUTF8 { put(UnsafeRawBufferPointer($0)) }
        }

        /// `Table.csvField` on UTF-8 bytes (the same rule, `Table.csvNeedsQuotes`).
        mutating func putCSVField(_ text: UnsafeRawBufferPointer) -> Bool {
            let quote = UInt8(ascii: "\"")
            guard Table.csvNeedsQuotes(text) else { return put(text) }
            guard put(quote) else { return false }
            for byte in text {
                if byte == quote { guard put(quote) else { return false } }
                guard put(byte) else { return false }
            }
            return put(quote)
        }
    }

    /// `-?(0|[1-9][0-9]*)` with at most 15 digits and not `-0`: `FieldValidator.format` writes it as it is.
    static func isPlainInteger(_ token: UnsafeRawBufferPointer) -> Bool {
        let digits = token.first == UInt8(ascii: "-") ? token.count - 1 : token.count
        guard (1...15).contains(digits) else { return false }
        let first = token[token.count - digits]
        if first == UInt8(ascii: "0") && digits > 1 || first == UInt8(ascii: "0") && digits < token.count {
            return false
        }
        return token.suffix(digits).allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    private var fieldScanner: (columns: [String], scanner: FieldScanner)?

    private func scanner(_ columns: [String]) -> FieldScanner {
        if let fieldScanner, fieldScanner.columns == columns { return fieldScanner.scanner }
        let scanner = FieldScanner(fields: columns)
        fieldScanner = (columns, scanner)
        return scanner
    }

    func write(_ record: JSONValue, schema: ObjectSchema?) throws(OStackError) {
        switch format {
        case .csv:
            if columns == nil { columns = Self.columns(first: record, schema: schema) }
            if count == 0 { append(header(columns!)) }
            // An empty text is `""`, so that it reads back as one; null is an empty cell.
            append(
                columns!.map { record[$0] == .string("") ? "\"\"" : Table.csvField(value(record[$0])) }
                    .joined(separator: ",") + "\r\n")
        case .json:
            append((count == 0 ? "[" : ",\n") + JSONOutput.encode(record))
        default:
            append(JSONOutput.encode(record) + "\n")
        }
        count += 1
        if buffer.count >= 65_536 { try flush() }
    }

    func finish() throws(OStackError) {
        if format == .json { append(count == 0 ? "[]\n" : "]\n") }
        if format == .csv && count == 0, let columns { append(header(columns)) }
        try flush()
        guard let destination else { return }
        // Under its name only now, and never over a file that appeared meanwhile. (Not synced to
        // the disk first, as `cp` does not: that would cost a 100 000-record export a fifth of its
        // time; the name guards against a stopped export, not against a power cut.)
        do {
            try SecureFileSystem.publish(destination.partial, as: destination.path)
        } catch {
            throw Self.cannotCreate(destination.path, errno: error.errno)
        }
    }

    /// Closes the file; the partial one is removed whether or not it was linked to its name.
    func close() {
        guard ownsFile else { return }
        Glibc.close(fd)
        if let destination {
            unlink(destination.partial)
            PartialFile.release()
        }
    }

    /// The CSV header line: field names (from the server when there is no metadata), sanitised for a terminal.
    private func header(_ columns: [String]) -> String {
        columns.map { Table.csvField(sanitize ? OutputFilter.sanitizeKeepingLines($0) : $0) }.joined(separator: ",")
            + "\r\n"
    }

    private func value(_ value: JSONValue?) -> String {
        let text = value.map(RecordText.text) ?? ""
        return sanitize ? OutputFilter.sanitizeKeepingLines(text) : text
    }

    private func append(_ text: String) { buffer.append(contentsOf: text.utf8) }

    private func flush() throws(OStackError) {
        var offset = 0
        while offset < buffer.count {
            let n = buffer.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            // The reader went away (`… | head`): the rest is not wanted; stop as `head` expects.
            if n < 0 && errno == EPIPE && !ownsFile { exit(0) }
            guard n > 0 else { throw OStackError(.storageFailure, detail: "export write errno \(errno)") }
            offset += n
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// `id`, the object's fields in metadata order, then the system columns; without metadata the
    /// first record's keys (`id` first).
    static func columns(first record: JSONValue, schema: ObjectSchema?) -> [String] {
        let keys = Set((record.objectValue ?? [:]).keys)
        if let schema {
            // Each name once (metadata may declare a system field such as `owner_id` itself).
            let fields = ["id"] + schema.fields.map(\.name).filter { $0 != "id" }
            return fields + ObjectSchema.systemFields.filter { !fields.contains($0) && keys.contains($0) }
        }
        return ["id"] + keys.filter { $0 != "id" }.sorted()
    }
}

extension RecordsCommand {
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract: "Create records from a CSV, JSON or NDJSON file: all rows checked first, then queued and pushed.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The object, e.g. task.", completion: ShellCompletions.objects) var object: String
        @Argument(help: "The file, or - for stdin (then --format is needed).", completion: .file()) var file: String
        @Option(
            name: .long,
            help: ArgumentHelp(
                "Without an id column: the field whose value identifies a row (the same value, the same record).",
                valueName: "field"))
        var key: String?
        @Flag(name: .customLong("skip-invalid"), help: "Queue the valid rows even when some are not valid.")
        var skipInvalid = false
        @Flag(name: .customLong("dry-run"), help: "Check every row and report; queue nothing.") var dryRun = false
        @Flag(name: .long, help: "Queue the records without pushing them now.") var offline = false

        struct Row {
            var line: Int
            var fields: [String: JSONValue]
        }

        struct Problem: Encodable, Error {
            var line: Int
            var problems: [String]
        }

        struct Document: Encodable {
            var object: String
            var rows: Int
            var queued: Int
            var existing: Int
            var invalid: [Problem]
            var pushed: Int?
            var dryRun: Bool
            /// Rows already here whose earlier push had failed, sent again and delivered now.
            var sentAgain: Int?
        }

        func run() async throws {
            // `--format` is the file's; what the import prints is chosen by --json, --jq and
            // --template alone (an NDJSON file from stdin used to print a JSON report).
            var output = global
            output.format = nil
            try await CommandRunner.run(output) { context in
                let format = try Self.format(global.format, file: file)
                let session = try context.selectedSession()
                let schema = try session.metadata.object(object).schema
                let validator = FieldValidator(schema: schema)
                try Self.checkKey(key, schema: schema)
                let bytes = try APIRequest.read(file)
                var invalid: [Problem] = []
                var rows: [Row] = []
                for parsed in try Self.parse(bytes, format: format, validator: validator) {
                    switch parsed {
                    case .success(let row): rows.append(row)
                    case .failure(let problem): invalid.append(problem)
                    }
                }
                // A stable id for every row: its own, or one derived from --key.
                var seen: [String: Int] = [:]
                var valid: [Row] = []
                for var row in rows {
                    var problems = validator.problems(in: row.fields, complete: true).map(\.message)
                    // An id that cannot be a record's address (RecordWrites refuses it too): named
                    // here with its line, before anything is queued.
                    let given = row.fields["id"].flatMap { $0 == .null ? nil : $0 }
                    if let given, given.stringValue == nil {
                        problems.append("an id must be a string")
                    } else if let text = given?.stringValue, ["", ".", ".."].contains(text) {
                        problems.append("an id cannot be empty, '.' or '..'")
                    } else if let text = given?.stringValue, !PushClassifier.isUsableID(text) {
                        problems.append("an id has 1 to 255 characters, none of them a control character")
                    } else if row.fields["id"]?.stringValue == nil {
                        if let key, let value = row.fields[key], value != .null, value != .string("") {
                            row.fields["id"] = .string(
                                RecordWrites.importID(object: object, key: key, value: RecordText.text(value)))
                        } else {
                            problems.append(
                                key.map { "no value for the key field \($0)" }
                                    ?? "no id (add an id column, or --key FIELD)")
                        }
                    }
                    if let id = row.fields["id"]?.stringValue {
                        if let first = seen[id] {
                            problems.append("the same record as line \(first)")
                        } else {
                            seen[id] = row.line
                        }
                    }
                    if problems.isEmpty {
                        valid.append(row)
                    } else {
                        invalid.append(Problem(line: row.line, problems: problems))
                    }
                }
                invalid.sort { $0.line < $1.line }
                // Rows already here (an earlier run of the same import) are not created again.
                let here = try session.writes.existing(object, ids: valid.map { $0.fields["id"]!.stringValue! })
                let fresh = valid.filter { !here.contains($0.fields["id"]!.stringValue!) }
                let existing = valid.count - fresh.count
                // Rows that could not even be read are problems without a row: counted once each (a
                // set of lines, not a search of every row per problem, for a million-line file).
                let rowLines = Set(rows.map(\.line))
                var document = Document(
                    object: object,
                    rows: rows.count + invalid.filter { !rowLines.contains($0.line) }.count,
                    queued: 0, existing: existing, invalid: invalid, pushed: nil, dryRun: dryRun)
                if !invalid.isEmpty && !skipInvalid || dryRun {
                    Self.report(document, context: context, refused: !dryRun)
                    if !invalid.isEmpty && !skipInvalid {
                        throw OStackError(
                            .validation,
                            context: .init(
                                object: object, count: invalid.count,
                                suggestion:
                                    "Nothing was queued. Fix the rows above, or pass --skip-invalid to import the others."
                            ),
                            detail: "import: invalid rows")
                    }
                    return
                }
                // One transaction per chunk. Pushing a file, the push queues a batch of rows while it
                // sends the one before (`PushFeed`); otherwise, and whatever a stopped push left, in
                // chunks of 5 000 (each commit writes and syncs the pages it touched: fewer, larger
                // ones are faster; a chunk costs a few MB). Rows read from stdin are all queued before
                // the push: cut off part-way, the rest could not be read again.
                // Rows already here whose create failed for a reason that may pass now (not a refusal)
                // are sent again with this import: running it again is how a failed import is
                // recovered (they were skipped as "already here", and stayed failed).
                let again =
                    here.isEmpty || offline
                    ? []
                    : try session.store.entries(statuses: [.failed]).filter {
                        $0.object == object && $0.operation == .create && here.contains($0.recordID)
                            && $0.failure?.isRefusal != true
                    }.map(\.id)
                if !again.isEmpty { _ = try session.store.retry(ids: again) }
                var next = 0
                var position: [String: Int] = [:]
                for (index, row) in fresh.enumerated() { position[row.fields["id"]?.stringValue ?? ""] = index }
                let feed = PushFeed(
                    rows: fresh.count, object: object, waiting: { id in position[id].map { $0 >= next } ?? false }
                ) { limit throws(OStackError) in
                    let taken = try session.writes.queueCreates(object, fresh[next..<next + limit].map(\.fields))
                    next += taken
                    return taken
                }
                // Entries this import queues come after this mark: those still queued after the push
                // were not delivered (failed or in conflict ones included).
                let mark = try session.store.queueMark()
                let pushing = !offline && (!fresh.isEmpty || !again.isEmpty)
                // Only a regular file can be read again (not stdin, a pipe or a device).
                var status = stat()
                let rereadable = file != "-" && stat(file, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
                if !pushing || !rereadable { try feed.drain() }
                var failure: OStackError?
                var stopped: OStackError?
                if pushing {
                    let line = ProgressLine.make(context: context)
                    var progress: (@Sendable (SyncProgress) -> Void)?
                    if let line { progress = { line.update($0) } }
                    // The audit trail is anchored (and `status`'s summary written) between requests as
                    // rows get queued, not only at the end.
                    feed.pause = { session.didChange() }
                    InterruptMessage.install(
                        rereadable
                            ? "ostack: interrupted: the rows queued so far are kept; run the same import again to "
                                + "queue the rest (rows already here are skipped), or `ostack sync` to push what is queued."
                            : "ostack: interrupted: every row is queued; `ostack sync` pushes what is left.")
                    defer { InterruptMessage.remove() }
                    do throws(OStackError) {
                        let result = try session.sync.sync(push: true, pull: false, progress: progress, feed: feed)
                        failure = result.exitError(account: session.account.alias)
                    } catch {
                        stopped = error
                    }
                    line?.clear()
                }
                // What a stopped push left is queued all the same; a step that failed is reported after
                // what was done.
                var unqueued: OStackError?
                do throws(OStackError) { try feed.drain() } catch { unqueued = error }
                document.queued = feed.queued
                if document.queued > 0 { session.didChange() }
                if pushing, let left = try? session.store.createsQueued(since: mark, object: object) {
                    document.pushed = max(0, document.queued - left)
                    // Every row of this import delivered (those sent again too): older queued changes
                    // that failed are not its failure (`sync` and `status` report them); a warning
                    // names them.
                    let againLeft = again.filter { (try? session.store.entry($0)) != nil }.count
                    document.sentAgain = again.count - againLeft
                    if left == 0, againLeft == 0, stopped == nil, unqueued == nil, let older = failure {
                        context.warn(older)
                        failure = nil
                    }
                }
                Self.report(document, context: context)
                if var unqueued {
                    unqueued.context.count = fresh.count - feed.queued
                    unqueued.context.suggestion =
                        "\(feed.queued) of \(fresh.count) rows were queued. Run the same import again to queue the rest."
                    throw unqueued
                }
                if let stopped { throw stopped }
                if var failure {
                    failure.context.savedAndQueued = true
                    try RecordsCommand.settleQueued(failure, context: context, requireOnline: false)
                }
            }
        }

        static func report(_ document: Document, context: CommandContext, refused: Bool = false) {
            context.emit(json: document) {
                var text = ""
                for problem in document.invalid.prefix(50) {
                    text +=
                        "line \(problem.line): "
                        + ErrorPresenter.sanitize(problem.problems.joined(separator: "; "), maxLength: 300) + "\n"
                }
                if document.invalid.count > 50 { text += "… and \(document.invalid.count - 50) more invalid rows\n" }
                let what = "\(document.object) record\(document.queued == 1 ? "" : "s")"
                if refused { return text + "\(document.invalid.count) of \(document.rows) rows are not valid." }
                if document.dryRun {
                    text +=
                        "Dry run: \(document.rows - document.invalid.count - document.existing) of \(document.rows) rows would be imported"
                } else {
                    text += "Imported \(document.queued) \(what)"
                }
                var notes: [String] = []
                if document.existing > 0 {
                    let again = document.sentAgain.map { $0 > 0 ? ", \($0) of them sent again" : "" } ?? ""
                    notes.append("\(document.existing) already here\(again)")
                }
                if !document.invalid.isEmpty { notes.append("\(document.invalid.count) invalid") }
                if let pushed = document.pushed { notes.append("\(pushed) pushed") }
                return text + (notes.isEmpty ? "" : " (" + notes.joined(separator: ", ") + ")") + "."
            }
        }

        static func format(_ given: OutputFormat?, file: String) throws(OStackError) -> OutputFormat {
            if let given {
                guard [.csv, .json, .ndjson].contains(given) else {
                    throw OStackError(
                        .invalidInput, context: .init(suggestion: "records import reads --format csv, json or ndjson."),
                        detail: "import format")
                }
                return given
            }
            let lower = file.lowercased()
            if lower.hasSuffix(".csv") { return .csv }
            if lower.hasSuffix(".ndjson") || lower.hasSuffix(".jsonl") { return .ndjson }
            if lower.hasSuffix(".json") { return .json }
            throw OStackError(
                .invalidInput,
                context: .init(suggestion: "Say which format the file is in: --format csv, json or ndjson."),
                detail: "import format unknown")
        }

        /// Rows with their line numbers (the line a CSV record starts on; the element's number in a
        /// JSON array); a row that cannot even be read is a problem of its own.
        static func parse(_ bytes: [UInt8], format: OutputFormat, validator: FieldValidator) throws(OStackError)
            -> [Result<Row, Problem>]
        {
            let system = Set(ObjectSchema.systemFields).subtracting(["id"])
            func clean(_ fields: [String: JSONValue]) -> [String: JSONValue] {
                fields.filter { !system.contains($0.key) && $0.value != .null }
            }
            switch format {
            case .csv:
                // Text in another encoding (Latin-1, Windows-1252) would be read with U+FFFD in
                // place of each byte it does not decode, and pushed so: refused, with the line. (A line
                // break never falls inside a UTF-8 sequence, so lines are checked one by one.)
                if let bad = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).firstIndex(where: {
                    String(validating: $0, as: UTF8.self) == nil
                }) {
                    throw OStackError(
                        .invalidInput,
                        context: .init(
                            suggestion:
                                "Line \(bad + 1) is not UTF-8 text. Save the file as UTF-8 and import it again; nothing was imported."
                        ),
                        detail: "import csv: not UTF-8")
                }
                // Blank lines before the header are skipped: the header is the first line with text.
                let records = Array(
                    try CSVReader.records(String(decoding: bytes, as: UTF8.self)).drop {
                        $0.fields.count == 1 && $0.fields[0].isEmpty && $0.emptyText.isEmpty
                    })
                guard let header = records.first?.fields else { return [] }
                try checkHeader(records, schema: validator.schema)
                // A blank line is no row (a lone `""` is one: an empty text).
                return records.dropFirst().filter {
                    !($0.fields.count == 1 && $0.fields[0].isEmpty && $0.emptyText.isEmpty)
                }.map { record in
                    guard record.fields.count == header.count else {
                        return .failure(
                            Problem(
                                line: record.line,
                                problems: ["\(record.fields.count) cells, the header has \(header.count)"]))
                    }
                    var fields: [String: JSONValue] = [:]
                    var problems: [String] = []
                    for (column, (name, text)) in zip(header, record.fields).enumerated()
                    where !text.isEmpty || record.emptyText.contains(column) {
                        if name == "id" {
                            if !text.isEmpty { fields["id"] = .string(text) }
                        } else if system.contains(name) {
                            continue
                        } else if text.isEmpty {
                            // `""`: an empty text in a text field (null in any other, as an empty cell).
                            if let field = validator.schema.field(name), FieldValidator.isText(field.type) {
                                fields[name] = .string("")
                            }
                        } else {
                            do throws(OStackError) {
                                // Export writes null as an empty cell: the word null is text here.
                                fields[name] = try validator.typedValue(field: name, text: text, nullWord: false)
                            } catch {
                                // The reason in our words ("Amount must be a number"), without its period.
                                var reason = error.context.suggestion?.rendered ?? "\(name): not a valid value"
                                if reason.hasSuffix(".") { reason.removeLast() }
                                problems.append(reason)
                            }
                        }
                    }
                    return problems.isEmpty
                        ? .success(Row(line: record.line, fields: fields))
                        : .failure(Problem(line: record.line, problems: problems))
                }
            case .json:
                let (value, repeated) = JSONValue.parseNamingRepeats(bytes)
                guard let parsed = value else {
                    let line = JSONValue.errorLine(bytes) ?? 1
                    throw OStackError(
                        .invalidInput,
                        context: .init(
                            suggestion:
                                "Line \(line): the file is not valid JSON (or holds a number too large to read). Nothing was imported."
                        ),
                        detail: "import json: not JSON")
                }
                if let name = repeated {
                    throw OStackError(
                        .invalidInput,
                        context: .init(
                            suggestion: .text("The file names '\(name)' twice in one object: keep one. Nothing was imported.")),
                        detail: "import json: repeated name")
                }
                guard let items = parsed.arrayValue else {
                    throw OStackError(
                        .invalidInput,
                        context: .init(
                            suggestion:
                                "A JSON import is one array of objects; for one object per line, use --format ndjson."),
                        detail: "import json")
                }
                return items.enumerated().map { index, item in
                    guard let fields = item.objectValue else {
                        return .failure(Problem(line: index + 1, problems: ["not an object"]))
                    }
                    return .success(Row(line: index + 1, fields: clean(fields)))
                }
            default:
                var results: [Result<Row, Problem>] = []
                for (index, line) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
                    .enumerated()
                where !line.allSatisfy({ $0 == 32 || $0 == 13 }) {
                    let (value, repeated) = JSONValue.parseNamingRepeats(Array(line))
                    switch value {
                    case .object(let fields)?:
                        if let repeated {
                            results.append(.failure(Problem(line: index + 1, problems: ["'\(repeated)' appears twice"])))
                        } else {
                            results.append(.success(Row(line: index + 1, fields: clean(fields))))
                        }
                    case nil: results.append(.failure(Problem(line: index + 1, problems: ["not valid JSON"])))
                    default: results.append(.failure(Problem(line: index + 1, problems: ["not a JSON object"])))
                    }
                }
                return results
            }
        }

        /// A CSV header names each field once, and only fields the object has (or `id` and the
        /// server's own fields, which are skipped): otherwise every row would be refused with the
        /// same problem, or one of two cells of a field silently dropped. `invalid-input` naming the
        /// column; nothing is imported.
        /// A column without a name (a spreadsheet's trailing comma) is fine while all its cells are empty.
        static func checkHeader(_ records: [CSVReader.Record], schema: ObjectSchema) throws(OStackError) {
            func refuse(_ line: Int, _ what: Wording, _ detail: String) -> OStackError {
                OStackError(
                    .invalidInput,
                    context: .init(object: schema.name, suggestion: "Line \(line): \(what) Nothing was imported."),
                    detail: "import csv: \(detail)")
            }
            guard let (line, header, _) = records.first else { return }
            var seen = Set<String>()
            for (index, name) in header.enumerated() {
                guard !name.isEmpty else {
                    if let filled = records.dropFirst().first(where: {
                        $0.fields.count > index && !$0.fields[index].isEmpty
                    }) {
                        throw refuse(
                            filled.line, "column \(index + 1) has a value but no name in the header.", "unnamed column")
                    }
                    continue
                }
                guard seen.insert(name).inserted else {
                    throw refuse(line, "the column '\(name)' appears twice.", "duplicate column")
                }
                guard name == "id" || ObjectSchema.systemFields.contains(name) || schema.field(name) != nil else {
                    throw refuse(
                        line, "'\(name)' is not a field of \(schema.label). \(fieldHint(name, schema))",
                        "unknown column")
                }
            }
        }

        /// "Did you mean 'title'?", or where the fields are listed.
        static func fieldHint(_ name: String, _ schema: ObjectSchema) -> Wording {
            schema.suggestion(for: name).map { "Did you mean '\($0)'?" } ?? .see(.objectsShow(object: schema.name))
        }

        /// `--key` names a field of the object (checked before any row, not reported once per row).
        static func checkKey(_ key: String?, schema: ObjectSchema) throws(OStackError) {
            guard let key, key != "id", schema.field(key) == nil else { return }
            throw OStackError(
                .invalidInput,
                context: .init(
                    object: schema.name,
                    suggestion: "--key: '\(key)' is not a field of \(schema.label). \(fieldHint(key, schema))"),
                detail: "import: unknown key field")
        }
    }
}

/// RFC 4180 CSV: fields separated by commas, quoted fields may hold commas, doubled quotes and line
/// breaks; CRLF or LF line ends. Each record knows the line it starts on. A quoted cell that is never
/// closed (it would swallow every line after it into one cell) or text after a cell's closing quote
/// is `invalid-input` naming the line: nothing is imported.
enum CSVReader {
    /// A record: the line it starts on, its cells, and which of its cells are a quoted empty cell
    /// (`""`: an empty text, where an empty cell is null — export writes them so).
    typealias Record = (line: Int, fields: [String], emptyText: Set<Int>)

    static func records(_ text: String) throws(OStackError) -> [Record] {
        func malformed(_ line: Int, _ what: String) -> OStackError {
            OStackError(
                .invalidInput,
                context: .init(suggestion: .text("Line \(line): \(what). Nothing was imported.")),
                detail: "import csv: \(what)")
        }
        var records: [Record] = []
        var fields: [String] = []
        var emptyText = Set<Int>()
        var field = ""
        var quoted = false
        var closed = false  // the current cell was quoted and its quote is closed
        var quoteLine = 1
        var line = 1
        var start = 1
        var characters = Array(text.unicodeScalars)[...]
        if characters.first == "\u{FEFF}" { characters = characters.dropFirst() }
        var index = characters.startIndex
        while index < characters.endIndex {
            let c = characters[index]
            index += 1
            if quoted {
                if c == "\"" {
                    if index < characters.endIndex && characters[index] == "\"" {
                        field.unicodeScalars.append("\"")
                        index += 1
                    } else {
                        quoted = false
                        closed = true
                    }
                } else {
                    if c == "\n" { line += 1 }
                    field.unicodeScalars.append(c)
                }
            } else if closed && c != "," && c != "\n" && c != "\r" {
                throw malformed(line, "text after the closing quote of a quoted cell")
            } else if c == "\"" && field.isEmpty {
                quoted = true
                quoteLine = line
            } else if c == "," {
                if closed && field.isEmpty { emptyText.insert(fields.count) }
                fields.append(field)
                field = ""
                closed = false
            } else if c == "\n" || c == "\r" {
                if closed && field.isEmpty { emptyText.insert(fields.count) }
                closed = false
                if c == "\r" && index < characters.endIndex && characters[index] == "\n" { index += 1 }
                fields.append(field)
                records.append((start, fields, emptyText))
                fields = []
                emptyText = []
                field = ""
                line += 1
                start = line
            } else {
                field.unicodeScalars.append(c)
            }
        }
        if quoted { throw malformed(quoteLine, "a quoted cell is not closed") }
        if !field.isEmpty || !fields.isEmpty || closed {
            if closed && field.isEmpty { emptyText.insert(fields.count) }
            fields.append(field)
            records.append((start, fields, emptyText))
        }
        return records
    }
}
