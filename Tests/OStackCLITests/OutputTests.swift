import ArgumentParser
import OStackCore
import OStackTestSupport
import Testing

@testable import OStackCLI

/// Tables that fit, the machine formats, and the "did you mean" of usage errors (docs/output.md).
@Suite struct OutputTests {
    let table = Table(
        headers: ["id", "title", "status"],
        rows: [["tsk_1", "A very long title that will not fit", "open"], ["tsk_22", "Short", "done"]])

    @Test func aTableFitsTheWidthWithTruncationMarks() {
        var terminal = Terminal(environment: [:], noColorFlag: true, format: .table)
        terminal.width = 30
        let lines = table.render(terminal: terminal).split(separator: "\n")
        #expect(lines.count == 3)
        for line in lines { #expect(DisplayWidth.of(String(line)) <= 30, "\(line)") }
        #expect(lines[1].hasPrefix("tsk_1   A very long"))
        #expect(lines[1].contains("…"))
        #expect(lines[2].hasPrefix("tsk_22  Short"))
        #expect(lines[0].hasPrefix("ID      TITLE"))
    }

    /// A narrow terminal (40 columns, the seven columns of `records list`) cut every column to three
    /// characters, ids included: `KXu…`, which no command takes back. The key column stays whole,
    /// the columns that cannot be shown usefully are left out, and the table says so.
    @Test func aNarrowTableKeepsItsIDsWholeAndSaysWhatItLeftOut() {
        var terminal = Terminal(environment: [:], noColorFlag: true, format: .table)
        terminal.width = 40
        let records = Table(
            headers: ["id", "title", "status", "priority", "due_date", "amount", "updated_at"],
            rows: [["dbVjAY4YmFgxxsSK", "Seed 3", "done", "low", "2026-04-13", "3", "2026-11-29T05:52:52.364Z"]])
        let lines = records.render(terminal: terminal).split(separator: "\n").map(String.init)
        for line in lines { #expect(DisplayWidth.of(line) <= 40, "\(line)") }
        #expect(lines[0] == "ID                TITLE   STATUS  PRIOR…")
        #expect(lines[1] == "dbVjAY4YmFgxxsSK  Seed 3  done    low")
        #expect(lines[2] == "3 columns not shown: use --format tsv")
        #expect(lines.count == 3)
    }

    /// docs/commands.md documents `"account":ref|null` for audit events and doctor checks: a global
    /// event wrote no `account` key at all.
    @Test func aGlobalAuditEventSaysItsAccountIsNull() {
        let event = AuditCommand.EventDocument(
            seq: 1, time: "2026-11-29T00:00:00Z", account: nil, event: "e", outcome: "ok", details: [:])
        #expect(JSONOutput.encode(event).contains(#""account":null"#), "\(JSONOutput.encode(event))")
    }

    @Test func aTableThatFitsIsNotCut() {
        var terminal = Terminal(environment: [:], noColorFlag: true, format: .table)
        terminal.width = 200
        let text = table.render(terminal: terminal)
        #expect(!text.contains("…"))
        #expect(text.contains("A very long title that will not fit  open\n"))
    }

    @Test(arguments: [
        ([10, 40, 40], 50, [10, 18, 18]), ([5, 5, 5], 80, [5, 5, 5]),
        ([16, 7, 6, 8, 10, 6, 24], 80, [16, 7, 6, 8, 10, 6, 15]),
        ([60, 60], 20, [20, 0]), ([16, 7, 6, 8, 10, 6, 24], 40, [16, 6, 6, 6, 0, 0, 0]), ([16, 5], 10, [10, 0]),
        ([16, 40], 24, [16, 6]), ([3, 2, 2, 2], 9, [3, 2, 0, 0]),
    ])
    func fittedWidthsAddUp(natural: [Int], total: Int, expected: [Int]) {
        #expect(Table.fit(natural, into: total) == expected)
    }

    @Test func tsvAndCSVAreUnpaddedAndSanitised() {
        var terminal = Terminal(environment: [:], noColorFlag: true)
        terminal.format = nil
        terminal.stdoutIsTerminal = false
        let dirty = Table(headers: ["id", "note"], rows: [["a1", "tab\there,\"quoted\"\nnext \u{1B}]0;pwned\u{07}x"]])
        #expect(dirty.render(terminal: terminal) == "id\tnote\na1\ttab here,\"quoted\" next x\n")
        #expect(dirty.render(as: .csv, terminal: terminal) == "id,note\r\na1,\"tab here,\"\"quoted\"\" next x\"\r\n")
    }

    /// A server's total can be anything: the progress line never traps on it.
    @Test func progressWithAnyTotal() {
        for total in [Int.max, 0, 1, -5] {
            let line = ProgressLine.render(
                label: "pulling task", done: 1, total: total, unit: "records", elapsed: 10, width: 80)
            #expect(DisplayWidth.of(line) <= 79)
        }
        #expect(
            ProgressLine.render(label: "x", done: 41_000, total: 100_000, unit: "records", elapsed: 2, width: 200)
                .contains("41%  41 000/100 000  20 500/s  ETA 3 s"))
    }

    /// A comma or quote followed by a combining mark is still a comma or a quote to a CSV reader.
    @Test func csvQuotingSeesScalarsNotCharacters() {
        #expect(Table.csvField("a,\u{301}b") == "\"a,\u{301}b\"")
        #expect(Table.csvField("x\"\u{301}\ny") == "\"x\"\"\u{301}\ny\"")
        #expect(Table.csvField("plain") == "plain")
    }

    /// An empty text exports as `""` and null as an empty cell, on both of the export's paths (from
    /// the bytes, and from the decoded record for lists and objects), and the reader tells them
    /// apart: an empty text used to come back from a CSV round trip as null.
    @Test func anEmptyTextAndNullStayApartInCSV() throws {
        let directory = TemporaryDirectory(prefix: "csv-empty")
        let path = directory.path + "/out.csv"
        let sink = try ExportSink(path: path, format: .csv, columns: ["id", "title", "notes"])
        defer { sink.close() }
        let fast = Array(#"{"id":"a","title":"","notes":null}"#.utf8)
        #expect(try fast.withUnsafeBytes { try sink.write(json: $0, schema: nil) })
        try sink.write(
            JSONValue.object(["id": .string("b"), "title": .string(""), "notes": .array([.string("x")])]), schema: nil)
        try sink.write(JSONValue.object(["id": .string("c"), "title": .null, "notes": .string("")]), schema: nil)
        try sink.finish()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text == "id,title,notes\r\na,\"\",\r\nb,\"\",\"[\"\"x\"\"]\"\r\nc,,\"\"\r\n", "\(text)")
        let records = try CSVReader.records(text)
        #expect(records.map { $0.emptyText } == [[], [1], [1], [2]])
        #expect(try CSVReader.records("a\n\"\"\n\n").map { $0.emptyText } == [[], [0], []])
    }

    /// The export copies these number tokens as they are; everything else goes through
    /// `FieldValidator.format`, so both must agree on every token taken as plain.
    @Test func plainIntegersAreWrittenAsTheyAre() {
        for token in ["0", "7", "-7", "123456789012345", "-123456789012345"] {
            let plain = Array(token.utf8).withUnsafeBytes { ExportSink.isPlainInteger($0) }
            #expect(plain, "\(token)")
            #expect(FieldValidator.format(Double(token)!) == token)
        }
        for token in ["-0", "00", "01", "1.0", "1e3", "2.5", "1234567890123456", "-", "", "+1", "1-"] {
            #expect(!Array(token.utf8).withUnsafeBytes { ExportSink.isPlainInteger($0) }, "\(token)")
        }
    }

    @Test func wideCharactersTakeTwoColumns() {
        #expect(DisplayWidth.of("日本語") == 6)
        #expect(DisplayWidth.of("e\u{301}") == 1)
        #expect(DisplayWidth.truncate("日本語テキスト", to: 7) == "日本語…")
        #expect(DisplayWidth.truncate("abcdef", to: 4) == "abc…")
        #expect(DisplayWidth.truncate("abc", to: 3) == "abc")
    }

    @Test func columnsFollowMetadataOrderThenSystemColumns() throws {
        let item = try #require(
            JSONValue.parse(
                Array(
                    #"{"name":"task","fields":{"title":{"type":"text"},"status":{"type":"select"},"amount":{"type":"number"}},"ostack_field_order":["title","status","amount"]}"#
                        .utf8)))
        let schema = try #require(ObjectSchema(item: item))
        let record = try #require(
            JSONValue.parse(
                Array(#"{"id":"t1","amount":1,"status":"open","title":"A","zeta":1,"updated_at":"x"}"#.utf8)))
        #expect(
            RecordText.columns([record], fields: nil, schema: schema)
                == ["id", "title", "status", "amount", "zeta", "updated_at"])
        #expect(RecordText.columns([record], fields: ["status"], schema: schema) == ["id", "status"])
    }

    @Test func keyOrderIsTheDocumentsOrder() {
        let body = Array(
            #"{"success":true,"meta":{"fields":{"not":1,"these":2}},"data":{"item":{"name":"task","label":"A \"fields\" label","fields":{"zeta":{"fields":{"x":1}},"alpha":{"options":[{"a":[1,2,{}]}]},"mid\u00e9":{}}}}}"#
                .utf8)
        #expect(JSONKeyOrder.members(at: ["data", "item", "fields"], in: body) == ["zeta", "alpha", "midé"])
        #expect(JSONKeyOrder.members(at: ["fields"], in: Array(#"{"fields":{}}"#.utf8)) == [])
        #expect(JSONKeyOrder.members(at: ["fields"], in: Array(#"{"fields":{"a":1"#.utf8)) == nil)
        #expect(JSONKeyOrder.members(at: ["fields"], in: Array(#"{"other":[]}"#.utf8)) == nil)
        #expect(JSONKeyOrder.members(at: ["item", "fields"], in: Array(#"{"item":{"fields":[]}}"#.utf8)) == nil)
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(JSONKeyOrder.members(at: ["fields"], in: Array(deep.utf8)) == nil)
    }

    @Test func mistypedSubcommandsGetASuggestion() {
        #expect(UsageError.nearest("recrods", in: ["records", "sync"]) == "records")
        #expect(UsageError.nearest("stauts", in: ["run", "track", "untrack", "status"]) == "status")
        #expect(UsageError.nearest("conf", in: ["config", "conflicts"]) == "config")
        #expect(UsageError.nearest("confl", in: ["config", "conflicts"]) == "conflicts")
        #expect(UsageError.nearest("xyz", in: ["records"]) == nil)
        #expect(UsageError.commandPath(["records", "lst", "task"]).unknownWord == "lst")
        #expect(UsageError.commandPath(["records", "list", "task"]).unknownWord == nil)
    }

    /// Help text is written in paragraphs that ArgumentParser wraps to the terminal: a hard line
    /// break in the middle of a sentence shows up as a ragged break at any other width.
    @Test func helpTextHasNoMidSentenceBreaks() {
        var pending: [any ParsableCommand.Type] = [OStackCommand.self]
        var checked = 0
        while let command = pending.popLast() {
            pending += UsageError.describe(command).children
            let lines = command.configuration.discussion.split(separator: "\n", omittingEmptySubsequences: false)
            for (line, next) in zip(lines, lines.dropFirst()) where !line.isEmpty && !next.isEmpty {
                let ends = line.last.map { ".:)!?".contains($0) } ?? true
                let tabular = next.contains(":  ")
                #expect(ends || tabular || !(next.first?.isLowercase ?? false), "\(command._commandName): \(line)")
            }
            checked += 1
        }
        #expect(checked > 40)
    }
}

@Suite struct TemplateTests {
    let document = JSONValue.parse(
        Array(
            #"{"records":[{"id":"a","n":1.5,"ok":true,"tags":["x"]},{"id":"b","n":2,"ok":false,"note":null}],"total":2}"#
                .utf8))!

    @Test(arguments: [
        ("{{.total}}", "2"),
        ("{{range .records}}{{.id}}={{.n}};{{end}}", "a=1.5;b=2;"),
        ("{{range .records}}{{if .ok}}+{{else}}-{{end}}{{end}}", "+-"),
        (#"{{range .records}}{{.id}}{{"\n"}}{{end}}"#, "a\nb\n"),
        ("{{range .records}}{{.tags}}{{.note}}|{{end}}", #"["x"]|"#.appending("|")),
        ("{{.missing.deeper}}!", "!"),
        ("plain", "plain"),
    ])
    func renders(template: String, expected: String) throws {
        #expect(try Template(template).render(document) == expected)
    }

    @Test(arguments: [
        "{{range .records}}", "{{end}}", "{{.a", "{{if .x}}{{else}}", "{{records}}", #"{{"open}}"#, "{{.a..b}}",
    ])
    func refusesBrokenTemplates(template: String) {
        #expect(throws: Template.ParseError.self) { try Template(template) }
    }
}
