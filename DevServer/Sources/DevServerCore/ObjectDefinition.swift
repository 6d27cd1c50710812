/// One field of an object (PROTOCOL §4.2).
public struct FieldDefinition: Sendable {
    public var name: String
    public var type: String
    public var label: String
    public var required = false
    public var readonly = false
    public var maxLength: Int?
    public var minLength: Int?
    public var min: Double?
    public var max: Double?
    public var scale: Int?
    public var options: [(label: String, value: String)] = []
    public var defaultValue: JSONValue?
    public var reference: String?

    public init(_ name: String, _ type: String, _ label: String) {
        self.name = name
        self.type = type
        self.label = label
    }

    func with(_ change: (inout FieldDefinition) -> Void) -> FieldDefinition {
        var copy = self
        change(&copy)
        return copy
    }

    var metadata: JSONValue {
        var members: [(String, JSONValue)] = [
            ("name", .string(name)), ("type", .string(type)), ("label", .string(label)),
        ]
        if required { members.append(("required", .bool(true))) }
        if readonly { members.append(("readonly", .bool(true))) }
        if let maxLength { members.append(("maxLength", .number(Double(maxLength)))) }
        if let minLength { members.append(("minLength", .number(Double(minLength)))) }
        if let min { members.append(("min", .number(min))) }
        if let max { members.append(("max", .number(max))) }
        if let scale { members.append(("scale", .number(Double(scale)))) }
        if let reference { members.append(("reference", .string(reference))) }
        if let defaultValue { members.append(("defaultValue", defaultValue)) }
        if !options.isEmpty {
            members.append(
                (
                    "options",
                    .array(options.map { .object([("label", .string($0.label)), ("value", .string($0.value))]) })
                ))
        }
        return .object(members)
    }
}

/// An object (table) the dev server serves, with its metadata.
public struct ObjectDefinition: Sendable {
    public var name: String
    public var label: String
    public var pluralLabel: String
    public var idPrefix: String
    public var nameField: String
    public var fields: [FieldDefinition]

    /// Columns the server injects into every record.
    public static let systemFields = ["id", "created_at", "updated_at", "created_by", "updated_by", "owner_id"]

    public func field(_ name: String) -> FieldDefinition? { fields.first { $0.name == name } }

    public func isKnownField(_ name: String) -> Bool {
        Self.systemFields.contains(name) || field(name) != nil
    }

    var metadata: JSONValue {
        .object([
            ("name", .string(name)), ("label", .string(label)), ("pluralLabel", .string(pluralLabel)),
            ("nameField", .string(nameField)), ("searchableFields", .array([.string(nameField)])),
            (
                "enable",
                .object([
                    ("apiEnabled", .bool(true)),
                    ("apiMethods", .array(["list", "get", "create", "update", "delete"].map { .string($0) })),
                ])
            ),
            ("fields", .object(fields.map { ($0.name, $0.metadata) })),
        ])
    }

    /// task, project and contact (SPEC §11).
    public static let seeded: [ObjectDefinition] = [
        ObjectDefinition(
            name: "task", label: "Task", pluralLabel: "Tasks", idPrefix: "tsk", nameField: "title",
            fields: [
                FieldDefinition("title", "text", "Title").with {
                    $0.required = true; $0.maxLength = 200
                },
                FieldDefinition("status", "select", "Status").with {
                    $0.options = [("Open", "open"), ("In progress", "in_progress"), ("Done", "done")]
                    $0.defaultValue = .string("open")
                },
                FieldDefinition("priority", "select", "Priority").with {
                    $0.options = [("Low", "low"), ("Medium", "medium"), ("High", "high")]
                },
                FieldDefinition("due_date", "date", "Due date"),
                FieldDefinition("amount", "currency", "Amount").with {
                    $0.scale = 2; $0.min = 0
                },
                FieldDefinition("done", "boolean", "Done"),
                FieldDefinition("project_id", "lookup", "Project").with { $0.reference = "project" },
                FieldDefinition("notes", "textarea", "Notes"),
                FieldDefinition("estimate", "number", "Estimate (hours)").with {
                    $0.min = 0; $0.max = 1000
                },
                FieldDefinition("owner", "text", "Owner"),
            ]),
        ObjectDefinition(
            name: "project", label: "Project", pluralLabel: "Projects", idPrefix: "prj", nameField: "name",
            fields: [
                FieldDefinition("name", "text", "Name").with {
                    $0.required = true; $0.maxLength = 200
                },
                FieldDefinition("code", "text", "Code").with { $0.maxLength = 12 },
                FieldDefinition("budget", "currency", "Budget").with { $0.scale = 2 },
                FieldDefinition("active", "boolean", "Active"),
            ]),
        ObjectDefinition(
            name: "contact", label: "Contact", pluralLabel: "Contacts", idPrefix: "con", nameField: "name",
            fields: [
                FieldDefinition("name", "text", "Name").with {
                    $0.required = true; $0.maxLength = 200
                },
                FieldDefinition("email", "email", "E-mail"),
                FieldDefinition("phone", "phone", "Phone"),
                FieldDefinition("website", "url", "Website"),
                FieldDefinition("birthday", "date", "Birthday"),
            ]),
    ]
}

/// Field validation per metadata (PROTOCOL §6.2): returns `fields[]` error entries.
enum FieldValidator {
    static func validate(_ data: [(String, JSONValue)], object: ObjectDefinition, isCreate: Bool) -> [JSONValue] {
        var errors: [JSONValue] = []
        func error(
            _ field: FieldDefinition?, _ name: String, _ code: String, _ message: String, _ value: JSONValue,
            _ constraint: [(String, JSONValue)] = []
        ) {
            var members: [(String, JSONValue)] = [
                ("field", .string(name)), ("code", .string(code)), ("message", .string(message)),
                ("label", .string(field?.label ?? name)), ("value", value),
            ]
            if !constraint.isEmpty { members.append(("constraint", .object(constraint))) }
            errors.append(.object(members))
        }
        let provided = Dictionary(data, uniquingKeysWith: { _, last in last })
        for (name, value) in data {
            guard let field = object.field(name) else {
                if !ObjectDefinition.systemFields.contains(name) {
                    error(nil, name, "unknown_field", "\(name) is not a field of \(object.name)", value)
                }
                continue
            }
            if value.isNull { continue }
            switch field.type {
            case "text", "textarea", "phone", "lookup":
                guard case .string(let text) = value else {
                    error(field, name, "invalid_type", "\(name) must be a string", value); continue
                }
                if let maxLength = field.maxLength, text.count > maxLength {
                    error(
                        field, name, "max_length", "\(name) is too long", value,
                        [("maxLength", .number(Double(maxLength))), ("actual", .number(Double(text.count)))])
                }
                if let minLength = field.minLength, text.count < minLength {
                    error(
                        field, name, "min_length", "\(name) is too short", value,
                        [("minLength", .number(Double(minLength)))])
                }
            case "number", "currency", "percent":
                guard case .number(let number) = value else {
                    error(field, name, "invalid_number", "\(name) must be a number", value); continue
                }
                if let min = field.min, number < min {
                    error(field, name, "min_value", "\(name) is below \(min)", value, [("min", .number(min))])
                }
                if let max = field.max, number > max {
                    error(field, name, "max_value", "\(name) is above \(max)", value, [("max", .number(max))])
                }
                if let scale = field.scale {
                    let factor = pow10(scale)
                    if (number * factor).rounded() != number * factor {
                        error(
                            field, name, "max_scale", "\(name) has too many decimals", value,
                            [("scale", .number(Double(scale)))])
                    }
                }
            case "boolean":
                guard case .bool = value else {
                    error(field, name, "invalid_boolean", "\(name) must be true or false", value); continue
                }
            case "date":
                guard case .string(let text) = value, isDate(text) else {
                    error(field, name, "invalid_date", "\(name) must be a date (YYYY-MM-DD)", value); continue
                }
            case "email":
                guard case .string(let text) = value, isEmail(text) else {
                    error(field, name, "invalid_email", "\(name) must be an e-mail address", value); continue
                }
            case "url":
                guard case .string(let text) = value, text.hasPrefix("http://") || text.hasPrefix("https://") else {
                    error(field, name, "invalid_url", "\(name) must be a URL", value); continue
                }
            case "select":
                guard case .string(let text) = value, field.options.contains(where: { $0.value == text }) else {
                    error(
                        field, name, "invalid_option", "\(name) is not one of the options", value,
                        [("options", .array(field.options.map { .string($0.value) }))])
                    continue
                }
            default: break
            }
        }
        if isCreate {
            for field in object.fields where field.required {
                let value = provided[field.name]
                if value == nil || value!.isNull || value == .string("") {
                    error(field, field.name, "required", "\(field.name) is required", value ?? .null)
                }
            }
        } else {
            for field in object.fields where field.required {
                if let value = provided[field.name], value.isNull || value == .string("") {
                    error(field, field.name, "required", "\(field.name) is required", value)
                }
            }
        }
        return errors
    }

    static func pow10(_ exponent: Int) -> Double {
        var result = 1.0
        for _ in 0..<exponent { result *= 10 }
        return result
    }

    static func isDate(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let month = Int(parts[1]), let day = Int(parts[2]), Int(parts[0]) != nil
        else { return false }
        return (1...12).contains(month) && (1...31).contains(day)
    }

    static func isEmail(_ text: String) -> Bool {
        let parts = text.split(separator: "@", omittingEmptySubsequences: false)
        return parts.count == 2 && !parts[0].isEmpty && parts[1].contains(".") && !text.contains(" ")
    }
}
