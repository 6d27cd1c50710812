@testable import OStackCore
import Testing

@Suite struct FieldValidatorTests {
    /// The dev server's task object (DevServer ObjectDefinition.seeded), with a few more field types.
    static let taskItem = """
        {
          "name": "task", "label": "Task", "pluralLabel": "Tasks", "nameField": "title",
          "description": "free text that is not kept",
          "fields": {
            "title": { "name": "title", "type": "text", "label": "Title", "required": true, "maxLength": 200 },
            "status": { "type": "select", "label": "Status", "defaultValue": "open",
                        "options": [ { "label": "Open", "value": "open" }, { "label": "In progress", "value": "in_progress" },
                                     { "label": "Done", "value": "done" } ] },
            "amount": { "type": "currency", "label": "Amount", "precision": 18, "scale": 2, "min": 0 },
            "estimate": { "type": "number", "label": "Estimate (hours)", "min": 0, "max": 1000 },
            "done": { "type": "boolean", "label": "Done" },
            "due_date": { "type": "date", "label": "Due date" },
            "email": { "type": "email", "label": "E-mail" },
            "website": { "type": "url", "label": "Website" },
            "code": { "type": "text", "label": "Code", "minLength": 2, "maxLength": 5 },
            "tags": { "type": "multiselect", "label": "Tags", "options": ["red", "green"] },
            "number_ro": { "type": "autonumber", "label": "Number", "readonly": true, "required": true },
            "project_id": { "type": "lookup", "label": "Project", "reference": "project" },
            "starts_at": { "type": "datetime", "label": "Starts at" },
            "at_time": { "type": "time", "label": "At" },
            "bad name!": { "type": "text", "label": "Not an identifier" }
          }
        }
        """

    static func item(_ text: String = taskItem) throws -> JSONValue {
        try #require(JSONValue.parse(Array(text.utf8)))
    }

    let schema: ObjectSchema
    var validator: FieldValidator { FieldValidator(schema: schema) }

    init() throws {
        schema = try #require(ObjectSchema(item: try Self.item()))
    }

    func problems(_ data: [String: JSONValue], complete: Bool = false) -> [FieldValidator.Problem] {
        validator.problems(in: data, complete: complete)
    }

    func messages(_ data: [String: JSONValue], complete: Bool = false) -> [String] {
        problems(data, complete: complete).map(\.message)
    }

    // MARK: Schema parsing

    @Test func parsesTheObjectDefinition() throws {
        #expect(schema.name == "task")
        #expect(schema.label == "Task")
        #expect(schema.nameField == "title")
        // Sorted by name; a name that is not an identifier is dropped.
        #expect(
            schema.fields.map(\.name) == [
                "amount", "at_time", "code", "done", "due_date", "email", "estimate", "number_ro", "project_id",
                "starts_at",
                "status", "tags", "title", "website",
            ])
        let title = try #require(schema.field("title"))
        #expect(title.type == "text" && title.label == "Title" && title.required && title.maxLength == 200)
        let status = try #require(schema.field("status"))
        #expect(status.options == ["open", "in_progress", "done"])
        #expect(status.optionLabels == ["Open", "In progress", "Done"])
        let amount = try #require(schema.field("amount"))
        #expect(amount.scale == 2 && amount.min == 0 && amount.max == nil)
        #expect(schema.field("tags")?.options == ["red", "green"])
        #expect(schema.field("number_ro")?.readonly == true)
        #expect(schema.isKnown("updated_at") && schema.isKnown("title") && !schema.isKnown("titel"))
    }

    @Test func anArrayOfFieldsIsAcceptedToo() throws {
        let item = try Self.item(#"{"name":"x","fields":[{"name":"a","type":"number"},{"type":"text"},{"name":"b"}]}"#)
        let parsed = try #require(ObjectSchema(item: item))
        #expect(parsed.fields.map(\.name) == ["a", "b"])
        #expect(parsed.field("b")?.type == "text")
        #expect(parsed.field("b")?.label == "b")
        #expect(parsed.label == "x")
    }

    @Test func anItemWithoutAUsableNameIsRefused() throws {
        #expect(ObjectSchema(item: try Self.item(#"{"label":"x"}"#)) == nil)
        #expect(ObjectSchema(item: try Self.item(#"{"name":"a b"}"#)) == nil)
        #expect(ObjectSchema(item: try Self.item(#"{"name":""}"#)) == nil)
    }

    // MARK: Required

    @Test func requiredFieldsOnCreate() {
        #expect(
            problems([:], complete: true) == [
                FieldValidator.Problem(field: "title", label: "Title", message: "Title is required")
            ])
        #expect(messages(["title": .null], complete: true) == ["Title is required"])
        #expect(messages(["title": ""], complete: true) == ["Title is required"])
        #expect(messages(["title": "Write tests"], complete: true) == [])
        // A read-only required field is the server's to fill.
        #expect(!messages([:], complete: true).contains { $0.contains("Number") })
    }

    @Test func anUpdateChecksOnlyTheGivenFields() {
        #expect(messages([:]) == [])
        #expect(messages(["status": "done"]) == [])
        #expect(messages(["title": .null]) == ["Title is required"])
    }

    // MARK: Types

    @Test func wrongTypes() {
        #expect(messages(["amount": "12"]) == ["Amount must be a number"])
        #expect(messages(["estimate": true]) == ["Estimate (hours) must be a number"])
        #expect(messages(["done": "true"]) == ["Done must be true or false"])
        #expect(messages(["done": 1]) == ["Done must be true or false"])
        #expect(messages(["title": 5]) == ["Title must be text"])
        #expect(messages(["status": 1]) == ["Status must be one of its options"])
        #expect(messages(["tags": "red"]) == ["Tags must be a list"])
        #expect(messages(["due_date": ["2026-01-01"]]) == ["Due date must be text"])
        // Null is fine for an optional field of any type.
        #expect(messages(["amount": .null, "done": .null, "status": .null, "due_date": .null]) == [])
    }

    @Test func selectOptions() {
        #expect(messages(["status": "in_progress"]) == [])
        #expect(messages(["status": "closed"]) == ["Status must be one of: open, in_progress, done"])
        // The option's value, not its label.
        #expect(messages(["status": "Open"]) == ["Status must be one of: open, in_progress, done"])
        #expect(messages(["tags": ["red", "green"]]) == [])
        #expect(messages(["tags": []]) == [])
        #expect(messages(["tags": ["red", "blue"]]) == ["Tags takes only: red, green"])
        #expect(messages(["tags": [1]]) == ["Tags takes only: red, green"])
    }

    @Test func minimumAndMaximum() {
        #expect(messages(["amount": 0]) == [])
        #expect(messages(["amount": .number(-0.01)]) == ["Amount must be at least 0"])
        #expect(messages(["estimate": 1000]) == [])
        #expect(messages(["estimate": .number(1000.5)]) == ["Estimate (hours) must be at most 1000"])
        #expect(messages(["estimate": -1]) == ["Estimate (hours) must be at least 0"])
    }

    @Test func scale() {
        #expect(messages(["amount": .number(12.34)]) == [])
        #expect(messages(["amount": .number(12.3)]) == [])
        #expect(messages(["amount": 12]) == [])
        #expect(messages(["amount": .number(0.1 + 0.2)]) == [])  // 0.30000000000000004 is 0.3
        #expect(messages(["amount": .number(12.345)]) == ["Amount takes at most 2 decimal places"])
        #expect(messages(["amount": .number(0.001)]) == ["Amount takes at most 2 decimal places"])
        #expect(messages(["amount": .number(1_234_567.89)]) == [])
        // No scale: any number of decimals.
        #expect(messages(["estimate": .number(1.23456)]) == [])
    }

    @Test func textLength() {
        #expect(messages(["title": .string(String(repeating: "x", count: 200))]) == [])
        #expect(
            messages(["title": .string(String(repeating: "x", count: 201))]) == ["Title takes at most 200 characters"])
        // Characters, not bytes.
        #expect(messages(["title": .string(String(repeating: "é", count: 200))]) == [])
        #expect(messages(["code": "A"]) == ["Code needs at least 2 characters"])
        #expect(messages(["code": "ABCDEF"]) == ["Code takes at most 5 characters"])
        #expect(messages(["code": "AB"]) == [])
    }

    @Test(arguments: [
        ("2026-02-28", true), ("2026-02-30", false), ("2024-02-29", true), ("2023-02-29", false), ("2000-02-29", true),
        ("1900-02-29", false), ("2026-04-31", false), ("2026-12-31", true), ("2026-13-01", false),
        ("2026-00-10", false),
        ("2026-01-00", false), ("2026-1-01", false), ("20260101", false), ("2026-01-01T00:00:00Z", false), ("", false),
        ("abcd-ef-gh", false),
    ])
    func dates(text: String, valid: Bool) {
        let found = messages(["due_date": .string(text)])
        #expect(found == (valid ? [] : ["Due date must be a date (YYYY-MM-DD)"]), "\(text)")
    }

    @Test(arguments: [
        ("a@b.co", true), ("first.last@example.com", true), ("no-at-sign", false), ("a@b", false), ("@b.co", false),
        ("a@.co", false), ("a@b.co.", false), ("a b@c.de", false), ("a@@b.co", false), ("a@b@c.de", false),
    ])
    func emails(text: String, valid: Bool) {
        #expect(messages(["email": .string(text)]) == (valid ? [] : ["E-mail must be an e-mail address"]), "\(text)")
    }

    @Test(arguments: [
        ("https://example.com", true), ("http://ab", true), ("ftp://example.com", false), ("example.com", false),
        ("https://", false), ("https://exa mple.com", false),
    ])
    func webAddresses(text: String, valid: Bool) {
        #expect(
            messages(["website": .string(text)])
                == (valid ? [] : ["Website must be a web address (http:// or https://)"]),
            "\(text)")
    }

    @Test func datetimesAndTimes() {
        #expect(messages(["starts_at": "2026-01-31T10:00:00Z"]) == [])
        #expect(messages(["starts_at": "2026-01-31"]) == [])
        #expect(messages(["starts_at": "yesterday"]) == ["Starts at must be a date and time (ISO 8601)"])
        #expect(messages(["at_time": "09:30"]) == [])
        #expect(messages(["at_time": "23:59:59"]) == [])
        #expect(messages(["at_time": "24:00"]) == ["At must be a time (HH:MM)"])
        #expect(messages(["at_time": "12:60"]) == ["At must be a time (HH:MM)"])
        #expect(messages(["at_time": "noon"]) == ["At must be a time (HH:MM)"])
    }

    // MARK: Unknown, read-only and system fields

    @Test func unknownReadOnlyAndSystemFields() {
        #expect(
            problems(["nmae": "x"]) == [
                FieldValidator.Problem(field: "nmae", label: "nmae", message: "nmae is not a field of Task")
            ])
        #expect(messages(["number_ro": 5]) == ["Number is read-only"])
        #expect(messages(["id": "tsk_1", "updated_at": "2026-01-01T00:00:00Z", "owner_id": 5]) == [])
    }

    @Test func everyProblemIsReportedOncePerField() {
        let found = problems(["title": .null, "amount": "x", "status": "nope", "extra": 1], complete: true)
        #expect(found.map(\.field) == ["amount", "extra", "status", "title"])
        #expect(found.map(\.label) == ["Amount", "extra", "Status", "Title"])
    }

    @Test func validateThrowsValidationWithLabelsAndMessages() {
        let error = #expect(throws: OStackError.self) {
            try validator.validate(["amount": .number(12.345), "status": "closed"], complete: true)
        }
        #expect(error?.code == .validation)
        #expect(error?.context.object == "task")
        #expect(error?.context.fields == ["Amount", "Status", "Title"])
        #expect(
            error?.context.suggestion
                == "Amount takes at most 2 decimal places; Status must be one of: open, in_progress, done; Title is required."
        )
        #expect(throws: Never.self) { try validator.validate(["title": "ok", "amount": .number(1.5)], complete: true) }
    }

    // MARK: Typing --set values

    @Test func typedValues() throws {
        #expect(try validator.typedValue(field: "amount", text: "12.5") == .number(12.5))
        #expect(try validator.typedValue(field: "estimate", text: "-3") == .number(-3))
        #expect(try validator.typedValue(field: "done", text: "yes") == .bool(true))
        #expect(try validator.typedValue(field: "done", text: "TRUE") == .bool(true))
        #expect(try validator.typedValue(field: "done", text: "1") == .bool(true))
        #expect(try validator.typedValue(field: "done", text: "off") == .bool(false))
        #expect(try validator.typedValue(field: "done", text: "No") == .bool(false))
        #expect(try validator.typedValue(field: "title", text: "42") == .string("42"))
        #expect(try validator.typedValue(field: "title", text: "true") == .string("true"))
        #expect(try validator.typedValue(field: "status", text: "done") == .string("done"))
        #expect(try validator.typedValue(field: "due_date", text: "2026-01-31") == .string("2026-01-31"))
        #expect(try validator.typedValue(field: "tags", text: "red, green ,blue") == ["red", "green", "blue"])
        #expect(try validator.typedValue(field: "amount", text: "") == .null)
        #expect(try validator.typedValue(field: "title", text: "null") == .null)
    }

    /// Lists and objects as `records export` writes them into CSV cells (JSON) come back as the same
    /// values on import: a CSV round trip no longer turns `["a","b"]` into the list `["[\"a\"",
    /// "\"b\"]"]` or an object into text. Anything that is not such JSON is typed as before.
    @Test func exportedListsAndObjectsAreTypedBack() throws {
        #expect(try validator.typedValue(field: "tags", text: #"["red","green"]"#) == ["red", "green"])
        #expect(try validator.typedValue(field: "tags", text: "[red") == ["[red"])
        let structured = try #require(
            ObjectSchema(
                item: try Self.item(
                    #"{"name":"place","fields":{"where":{"type":"location","label":"Where"},"extra":{"type":"json","label":"Extra"}}}"#
                )))
        let typed = FieldValidator(schema: structured)
        #expect(try typed.typedValue(field: "where", text: #"{"lat":1.5,"lng":2}"#) == .object(["lat": .number(1.5), "lng": .number(2)]))
        #expect(try typed.typedValue(field: "extra", text: #"[1,{"a":true}]"#) == [1, ["a": true]])
        #expect(try typed.typedValue(field: "extra", text: "plain words") == .string("plain words"))
        #expect(try typed.typedValue(field: "extra", text: "{broken") == .string("{broken"))
    }

    /// Export writes null as an empty cell, so in a CSV cell the word null of a text field is text
    /// (an exported "null" title once came back as no title); `--set title=null` still clears.
    @Test func theWordNullInACSVTextCellIsText() throws {
        #expect(try validator.typedValue(field: "title", text: "null", nullWord: false) == .string("null"))
        #expect(try validator.typedValue(field: "title", text: "null") == .null)
        #expect(try validator.typedValue(field: "title", text: "", nullWord: false) == .null)
        #expect(try validator.typedValue(field: "amount", text: "null", nullWord: false) == .null)
        #expect(try validator.typedValue(field: "done", text: "null", nullWord: false) == .null)
        #expect(try validator.typedValue(field: "tags", text: "null", nullWord: false) == .null)
    }

    @Test(arguments: [
        ("amount", "twelve", "Amount must be a number."), ("amount", "1e400", "Amount must be a number."),
        ("estimate", "12,5", "Estimate (hours) must be a number."), ("done", "maybe", "Done must be true or false."),
        // Hexadecimal, which Swift's Double(String) reads (16 and 8 were stored).
        ("amount", "0x10", "Amount must be a number."), ("estimate", "0x1p3", "Estimate (hours) must be a number."),
    ])
    func typingErrors(field: String, text: String, suggestion: String) {
        let error = #expect(throws: OStackError.self) { try validator.typedValue(field: field, text: text) }
        #expect(error?.code == .validation)
        #expect(error?.context.suggestion == .text(suggestion))
        #expect(error?.context.fields == [schema.field(field)!.label])
    }

    @Test func typingAnUnknownFieldSuggestsTheClosestName() {
        let typo = #expect(throws: OStackError.self) { try validator.typedValue(field: "titel", text: "x") }
        #expect(typo?.code == .validation)
        #expect(typo?.context.suggestion == "Did you mean 'title'?")
        #expect(typo?.context.fields == ["titel"])
        let unknown = #expect(throws: OStackError.self) { try validator.typedValue(field: "zzzzzzzz", text: "x") }
        #expect(unknown?.context.suggestion?.commands == [.objectsShow(object: "task")])
    }

    /// `--set id=…` chooses a create's id, as `--data` does (it was "Did you mean 'id'?"); the other
    /// system fields are named as the server's.
    @Test func theIdIsTextAndSystemFieldsAreTheServers() throws {
        #expect(try validator.typedValue(field: "id", text: "r123") == .string("r123"))
        let system = #expect(throws: OStackError.self) { try validator.typedValue(field: "created_at", text: "x") }
        #expect(system?.context.suggestion == "'created_at' is set by the server.")
    }

    // MARK: Suggestions

    @Test(arguments: [
        ("titel", "title"), ("amout", "amount"), ("Title", "title"), ("STATUS", "status"), ("stauts", "status"),
        ("esti", "estimate"), ("due_dat", "due_date"), ("updated", "updated_at"),
    ])
    func suggestions(typed: String, expected: String) {
        #expect(schema.suggestion(for: typed) == expected, "\(typed)")
    }

    @Test func noSuggestionForSomethingUnrelated() {
        #expect(schema.suggestion(for: "zzzzzz") == nil)
        #expect(schema.suggestion(for: "qq") == nil)
        #expect(schema.suggestion(for: "di") == nil)  // "id" is short: one edit at most
        // Two edits away from a short name is too far.
        #expect(schema.suggestion(for: "xyd") == nil)
    }

    // MARK: Fingerprint

    @Test func fingerprintChangesWithTheFieldsOnly() throws {
        let again = try #require(ObjectSchema(item: try Self.item()))
        #expect(again.fingerprint == schema.fingerprint)
        #expect(schema.fingerprint.count == 32)
        #expect(schema.fingerprint.allSatisfy { $0.isHexDigit })

        var added = try Self.item()
        if case .object(var members) = added, case .object(var fields)? = members["fields"] {
            fields["priority"] = ["type": "select", "label": "Priority", "options": ["low", "high"]]
            members["fields"] = .object(fields)
            added = .object(members)
        }
        let withField = try #require(ObjectSchema(item: added))
        #expect(withField.fields.count == schema.fields.count + 1)
        #expect(withField.fingerprint != schema.fingerprint)

        // A changed constraint is a new version too; so is a new option.
        let longer = try #require(
            ObjectSchema(
                item: try Self.item(Self.taskItem.replacingOccurrences("\"maxLength\": 200", "\"maxLength\": 300"))))
        #expect(longer.fingerprint != schema.fingerprint)
        let moreOptions = try #require(
            ObjectSchema(
                item: try Self.item(
                    Self.taskItem.replacingOccurrences(#"["red", "green"]"#, #"["red", "green", "blue"]"#))))
        #expect(moreOptions.fingerprint != schema.fingerprint)
        // Free text that is not kept does not matter.
        let described = try #require(
            ObjectSchema(
                item: try Self.item(Self.taskItem.replacingOccurrences("free text that is not kept", "other words"))))
        #expect(described.fingerprint == schema.fingerprint)
    }
}

extension String {
    fileprivate func replacingOccurrences(_ target: String, _ replacement: String) -> String {
        let replaced = replacing(target, with: replacement)
        precondition(replaced != self, "test fixture: '\(target)' not found")
        return replaced
    }
}
