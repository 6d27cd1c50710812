import FoundationEssentials

/// Validates a record against cached metadata before it is written (docs/sync.md, "Writes and validation"):
/// required, type, select options, min/max, minLength/maxLength, scale. Messages are ostack's own
/// and name fields by their label. Failures are `validation` (exit 9).
public struct FieldValidator: Sendable {
    public struct Problem: Sendable, Equatable {
        public var field: String
        public var label: String
        public var message: String
    }

    public let schema: ObjectSchema

    public init(schema: ObjectSchema) {
        self.schema = schema
    }

    /// Problems in `data`. `complete`: the full record (create, or an update merged onto the current
    /// record), so a missing required field is a problem; otherwise only the given fields are checked.
    public func problems(in data: [String: JSONValue], complete: Bool) -> [Problem] {
        var problems: [Problem] = []
        for name in data.keys.sorted() where !ObjectSchema.systemFields.contains(name) {
            guard let field = schema.field(name) else {
                problems.append(Problem(field: name, label: name, message: "\(name) is not a field of \(schema.label)"))
                continue
            }
            if field.readonly {
                problems.append(Problem(field: name, label: field.label, message: "\(field.label) is read-only"))
                continue
            }
            if let problem = check(data[name]!, field) { problems.append(problem) }
        }
        if complete {
            for field in schema.fields where field.required && !field.readonly {
                let value = data[field.name]
                if value == nil || value == .null || value == .string("") {
                    if !problems.contains(where: { $0.field == field.name }) {
                        problems.append(
                            Problem(field: field.name, label: field.label, message: "\(field.label) is required"))
                    }
                }
            }
        }
        return problems
    }

    /// Throws `validation` with the problems (field labels in the context, messages in the hint).
    public func validate(_ data: [String: JSONValue], complete: Bool) throws(OStackError) {
        let found = problems(in: data, complete: complete)
        guard !found.isEmpty else { return }
        throw OStackError(
            .validation,
            context: .init(
                object: schema.name, fields: found.map(\.label),
                suggestion: .text(found.map(\.message).joined(separator: "; ") + ".")),
            detail: "local validation: \(found.map(\.field))")
    }

    func check(_ value: JSONValue, _ field: ObjectSchema.FieldSchema) -> Problem? {
        func problem(_ message: String) -> Problem { Problem(field: field.name, label: field.label, message: message) }
        if value == .null || (value == .string("") && field.required) {
            return field.required ? problem("\(field.label) is required") : nil
        }
        switch field.type {
        case "number", "currency", "percent", "rating", "slider", "progress":
            guard case .number(let number) = value, number.isFinite else {
                return problem("\(field.label) must be a number")
            }
            if let min = field.min, number < min {
                return problem("\(field.label) must be at least \(Self.format(min))")
            }
            if let max = field.max, number > max {
                return problem("\(field.label) must be at most \(Self.format(max))")
            }
            if let scale = field.scale, Self.decimals(number) > scale {
                return problem("\(field.label) takes at most \(scale) decimal place\(scale == 1 ? "" : "s")")
            }
            return nil
        case "boolean", "toggle":
            guard case .bool = value else { return problem("\(field.label) must be true or false") }
            return nil
        case "select", "radio":
            guard case .string(let text) = value else { return problem("\(field.label) must be one of its options") }
            if !field.options.isEmpty && !field.options.contains(text) {
                return problem("\(field.label) must be one of: \(field.options.joined(separator: ", "))")
            }
            return nil
        case "multiselect", "checkboxes", "tags":
            guard case .array(let items) = value else { return problem("\(field.label) must be a list") }
            if !field.options.isEmpty, items.contains(where: { !field.options.contains($0.stringValue ?? "\u{0}") }) {
                return problem("\(field.label) takes only: \(field.options.joined(separator: ", "))")
            }
            return nil
        case "json", "composite", "repeater", "record", "location", "address", "vector":
            return nil
        default:
            guard case .string(let text) = value else { return problem("\(field.label) must be text") }
            if let problem = checkFormat(text, field) { return problem }
            let length = text.count
            if let min = field.minLength, length < min {
                return problem("\(field.label) needs at least \(min) character\(min == 1 ? "" : "s")")
            }
            if let max = field.maxLength, length > max {
                return problem("\(field.label) takes at most \(max) character\(max == 1 ? "" : "s")")
            }
            return nil
        }
    }

    func checkFormat(_ text: String, _ field: ObjectSchema.FieldSchema) -> Problem? {
        func problem(_ message: String) -> Problem { Problem(field: field.name, label: field.label, message: message) }
        switch field.type {
        case "email":
            let parts = text.split(separator: "@", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !parts[1].hasPrefix("."),
                !parts[1].hasSuffix("."), !text.contains(" ")
            else { return problem("\(field.label) must be an e-mail address") }
        case "url":
            guard text.hasPrefix("https://") || text.hasPrefix("http://"), !text.contains(" "), text.count > 8 else {
                return problem("\(field.label) must be a web address (http:// or https://)")
            }
        case "date":
            guard Self.isDate(text) else { return problem("\(field.label) must be a date (YYYY-MM-DD)") }
        case "datetime":
            guard (try? Date(text, strategy: .iso8601)) != nil || Self.isDate(text) else {
                return problem("\(field.label) must be a date and time (ISO 8601)")
            }
        case "time":
            let parts = text.split(separator: ":")
            guard (2...3).contains(parts.count), let hour = Int(parts[0]), let minute = Int(parts[1]),
                (0..<24).contains(hour),
                (0..<60).contains(minute)
            else { return problem("\(field.label) must be a time (HH:MM)") }
        default: break
        }
        return nil
    }

    static func isDate(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]), year > 0,
            (1...12).contains(month)
        else { return false }
        let days = [
            31, (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31,
        ]
        return (1...days[month - 1]).contains(day)
    }

    static func decimals(_ number: Double) -> Int {
        var scaled = number
        for places in 0...12 {
            if abs(scaled - scaled.rounded()) < 1e-9 * max(1, abs(scaled)) { return places }
            scaled *= 10
        }
        return 13
    }

    public static func format(_ number: Double) -> String {
        number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
    }

    // MARK: Typing `--set field=value`

    /// Types a `--set` value (or a CSV cell) by the field's type: numbers, booleans, lists for
    /// multi-value fields (comma-separated, or a JSON array as `records export` writes lists), a JSON
    /// object or array for structured fields (json, composite, location, …) as export writes them,
    /// `null` for an empty value; everything else stays text. Unknown fields get a suggestion.
    /// The word `null` is null too, except where `nullWord` is false (a CSV cell: export writes null
    /// as an empty cell, so there `null` in a text field is the text "null").
    public func typedValue(field name: String, text: String, nullWord: Bool = true) throws(OStackError) -> JSONValue {
        guard let field = schema.field(name) else {
            // A create may choose its record's id, as with --data; the other system fields are the server's.
            if name == "id" {
                guard !text.isEmpty else {
                    throw OStackError(
                        .validation,
                        context: .init(object: schema.name, fields: [name], suggestion: "An id cannot be empty."),
                        detail: "empty id in --set")
                }
                return .string(text)
            }
            if ObjectSchema.systemFields.contains(name) {
                throw OStackError(
                    .validation,
                    context: .init(object: schema.name, fields: [name], suggestion: "'\(name)' is set by the server."),
                    detail: "system field in --set")
            }
            throw OStackError(
                .validation,
                context: .init(
                    object: schema.name, fields: [name],
                    suggestion: schema.suggestion(for: name).map { "Did you mean '\($0)'?" }
                        ?? "See \(command: .objectsShow(object: schema.name)) for its fields."),
                detail: "unknown field in --set")
        }
        if text.isEmpty { return .null }
        if text == "null" && (nullWord || !Self.isText(field.type)) { return .null }
        switch field.type {
        case "number", "currency", "percent", "rating", "slider", "progress":
            // Decimal only: Swift's `Double("0x10")` reads hexadecimal (16), which no user means.
            guard text.utf8.allSatisfy({ (48...57).contains($0) || [43, 45, 46, 69, 101].contains($0) }),
                let number = Double(text), number.isFinite
            else {
                throw OStackError(
                    .validation, context: .init(fields: [field.label], suggestion: "\(field.label) must be a number."),
                    detail: "--set number")
            }
            return .number(number)
        case "boolean", "toggle":
            switch text.lowercased() {
            case "true", "yes", "1", "on": return .bool(true)
            case "false", "no", "0", "off": return .bool(false)
            default:
                throw OStackError(
                    .validation,
                    context: .init(fields: [field.label], suggestion: "\(field.label) must be true or false."),
                    detail: "--set boolean")
            }
        case "multiselect", "checkboxes", "tags":
            if text.hasPrefix("["), case .array(let items)? = JSONValue.parse(Array(text.utf8)) { return .array(items) }
            return .array(text.split(separator: ",").map { .string(String($0).trimmingWhitespace()) })
        case "json", "composite", "repeater", "record", "location", "address", "vector":
            if text.hasPrefix("{") || text.hasPrefix("["), let value = JSONValue.parse(Array(text.utf8)),
                value.objectValue != nil || value.arrayValue != nil
            {
                return value
            }
            return .string(text)
        default:
            return .string(text)
        }
    }

    /// Whether `typedValue` keeps a value of this type as text (no number, boolean, list or
    /// structure is read from it).
    public static func isText(_ type: String) -> Bool {
        ![
            "number", "currency", "percent", "rating", "slider", "progress", "boolean", "toggle", "multiselect",
            "checkboxes", "tags", "json", "composite", "repeater", "record", "location", "address", "vector",
        ].contains(type)
    }
}
