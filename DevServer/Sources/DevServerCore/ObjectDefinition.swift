/// One field of an object (docs/protocol.md#metadata).
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
    /// What deleting the referenced record does to this record (a lookup's `deleteBehavior`):
    /// `set_null` (the default), `restrict` or `cascade` (`DataStore.applyDeleteBehaviors`).
    public var deleteBehavior: String?
    /// A single-column unique constraint (`unique: true` in the metadata).
    public var unique = false

    public init(_ name: String, _ type: String, _ label: String) {
        self.name = name
        self.type = type
        self.label = label
    }

    /// The behaviour the real engine resolves: a master-detail cascades unless it says `restrict`; a
    /// lookup does what it says, `set_null` by default; a required field cannot be cleared, so its
    /// `set_null` is a `restrict`.
    var resolvedDeleteBehavior: String {
        let declared =
            type == "master_detail" ? (deleteBehavior == "restrict" ? "restrict" : "cascade") : (deleteBehavior ?? "set_null")
        return declared == "set_null" && required ? "restrict" : declared
    }

    func with(_ change: (inout FieldDefinition) -> Void) -> FieldDefinition {
        var copy = self
        change(&copy)
        return copy
    }

    func metadata(_ translation: FieldTranslation?) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("name", .string(name)), ("type", .string(type)), ("label", .string(translation?.label ?? label)),
        ]
        if required { members.append(("required", .bool(true))) }
        if unique { members.append(("unique", .bool(true))) }
        if readonly { members.append(("readonly", .bool(true))) }
        if let maxLength { members.append(("maxLength", .number(Double(maxLength)))) }
        if let minLength { members.append(("minLength", .number(Double(minLength)))) }
        if let min { members.append(("min", .number(min))) }
        if let max { members.append(("max", .number(max))) }
        if let scale { members.append(("scale", .number(Double(scale)))) }
        if let reference { members.append(("reference", .string(reference))) }
        if let deleteBehavior { members.append(("deleteBehavior", .string(deleteBehavior))) }
        if let defaultValue { members.append(("defaultValue", defaultValue)) }
        if !options.isEmpty {
            members.append(
                (
                    "options",
                    .array(
                        options.map {
                            .object([
                                ("label", .string(translation?.options[$0.value] ?? $0.label)),
                                ("value", .string($0.value)),
                            ])
                        })
                ))
        }
        return .object(members)
    }
}

/// One field's entry in a translation bundle (`objects.<o>.fields.<f>`: label, option labels).
public struct FieldTranslation: Sendable {
    public var label: String?
    public var options: [String: String] = [:]

    public init(_ label: String?, options: [String: String] = [:]) {
        self.label = label
        self.options = options
    }
}

/// One object's entry in a locale's translation bundle (`objects.<o>`), as the real server's i18n
/// service holds it: metadata carries plain-string labels and the server swaps in the translation for
/// the request's `Accept-Language` (`packages/spec/src/system/translation.zod.ts`).
public struct ObjectTranslation: Sendable {
    public var label: String?
    public var pluralLabel: String?
    public var fields: [String: FieldTranslation] = [:]
}

/// A declared index (`indexes[]` in the object metadata); unique ones are enforced on write.
public struct IndexDefinition: Sendable {
    public var name: String
    public var fields: [String]
    public var unique: Bool
}

/// An object (table) the dev server serves, with its metadata.
public struct ObjectDefinition: Sendable {
    public var name: String
    public var label: String
    public var pluralLabel: String
    public var idPrefix: String
    public var nameField: String
    public var fields: [FieldDefinition]
    /// `enable.apiMethods`: the authored primitives (`get list create update delete bulk`); nil =
    /// unrestricted. `bulk` gates createMany/updateMany/deleteMany/batch (405 when absent).
    public var apiMethods: [String]? = ObjectDefinition.allPrimitives
    public var indexes: [IndexDefinition] = []
    /// Locale (`de`, `zh-CN`) → translations of labels.
    public var translations: [String: ObjectTranslation] = [:]

    public static let allPrimitives = ["get", "list", "create", "update", "delete", "bulk"]

    /// Columns the server injects into every record.
    public static let systemFields = ["id", "created_at", "updated_at", "created_by", "updated_by", "owner_id"]

    public func field(_ name: String) -> FieldDefinition? { fields.first { $0.name == name } }

    public func isKnownField(_ name: String) -> Bool {
        Self.systemFields.contains(name) || field(name) != nil
    }

    var metadata: JSONValue { metadata(locale: nil) }

    /// The bundle locale serving `requested` (exact, case-insensitive, base language, then a variant
    /// of the base language), as `resolveBundleLocale` in `packages/spec/src/system/i18n-resolver.ts`.
    public func translationLocale(_ requested: String?) -> String? {
        guard let requested else { return nil }
        if translations[requested] != nil { return requested }
        let lower = requested.lowercased()
        let available = translations.keys.sorted()
        if let match = available.first(where: { $0.lowercased() == lower }) { return match }
        let base = String(lower.prefix { $0 != "-" })
        if let match = available.first(where: { $0.lowercased() == base }) { return match }
        return available.first { String($0.lowercased().prefix { $0 != "-" }) == base }
    }

    /// The object's metadata with labels translated for `locale` (untranslated when nil or unknown).
    public func metadata(locale: String?) -> JSONValue {
        let translation = translationLocale(locale).flatMap { translations[$0] }
        var enable: [(String, JSONValue)] = [("apiEnabled", .bool(true))]
        if let apiMethods { enable.append(("apiMethods", .array(apiMethods.map { .string($0) }))) }
        var members: [(String, JSONValue)] = [
            ("name", .string(name)), ("label", .string(translation?.label ?? label)),
            ("pluralLabel", .string(translation?.pluralLabel ?? pluralLabel)),
            ("nameField", .string(nameField)), ("searchableFields", .array([.string(nameField)])),
            ("enable", .object(enable)),
            ("fields", .object(fields.map { ($0.name, $0.metadata(translation?.fields[$0.name])) })),
        ]
        if !indexes.isEmpty {
            members.append(
                (
                    "indexes",
                    .array(
                        indexes.map {
                            .object([
                                ("name", .string($0.name)), ("fields", .array($0.fields.map { .string($0) })),
                                ("unique", .bool($0.unique)),
                            ])
                        })
                ))
        }
        return .object(members)
    }

    /// The effective operation set (the 405 body's `allowed`): the declared primitives plus the verbs
    /// derived from them, in `API_OPERATION_ORDER` (`packages/spec/src/data/api-derivation.ts`).
    public var allowedOperations: [String] {
        let primitives = Set(apiMethods ?? Self.allPrimitives)
        var derived = primitives
        if primitives.contains("create") && primitives.contains("update") { derived.insert("upsert") }
        if primitives.contains("list") { derived.formUnion(["aggregate", "search", "export"]) }
        if primitives.contains("create") || primitives.contains("update") { derived.insert("import") }
        return [
            "get", "list", "create", "update", "delete", "upsert", "bulk", "aggregate", "history", "search",
            "restore", "purge", "import", "export",
        ].filter { derived.contains($0) }
    }

    /// Whether `operation` (a primitive) is allowed; `bulk` needs `bulk` and its child write kind.
    public func allows(_ operation: String, bulkChild: String? = nil) -> Bool {
        guard let apiMethods else { return true }
        if operation == "bulk", let bulkChild {
            guard apiMethods.contains("bulk") else { return false }
            if bulkChild == "upsert" { return apiMethods.contains("create") && apiMethods.contains("update") }
            return apiMethods.contains(bulkChild) || !Self.allPrimitives.contains(bulkChild)
        }
        return apiMethods.contains(operation)
    }

    /// task, project and contact (docs/devserver.md).
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
            ],
            translations: [
                "de": ObjectTranslation(
                    label: "Aufgabe", pluralLabel: "Aufgaben",
                    fields: [
                        "title": FieldTranslation("Titel"),
                        "status": FieldTranslation(
                            "Status", options: ["open": "Offen", "in_progress": "In Arbeit", "done": "Erledigt"]),
                        "priority": FieldTranslation(
                            "Priorität", options: ["low": "Niedrig", "medium": "Mittel", "high": "Hoch"]),
                        "due_date": FieldTranslation("Fälligkeitsdatum"),
                        "done": FieldTranslation("Erledigt"),
                    ])
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
                FieldDefinition("email", "email", "E-mail").with { $0.unique = true },
                FieldDefinition("phone", "phone", "Phone"),
                FieldDefinition("website", "url", "Website"),
                FieldDefinition("birthday", "date", "Birthday"),
            ]),
        // Bulk disabled (`enable.apiMethods` without `bulk`): createMany/updateMany/deleteMany/batch
        // answer 405 OBJECT_API_METHOD_NOT_ALLOWED. A composite unique index on (task_id, title).
        ObjectDefinition(
            name: "note", label: "Note", pluralLabel: "Notes", idPrefix: "nte", nameField: "title",
            fields: [
                FieldDefinition("title", "text", "Title").with {
                    $0.required = true; $0.maxLength = 200
                },
                FieldDefinition("body", "textarea", "Body"),
                // A task with notes cannot be deleted (409 `DELETE_RESTRICTED`, also as a row of deleteMany).
                FieldDefinition("task_id", "lookup", "Task").with {
                    $0.reference = "task"; $0.deleteBehavior = "restrict"
                },
            ],
            apiMethods: ["get", "list", "create", "update", "delete"],
            indexes: [IndexDefinition(name: "idx_note_task_title", fields: ["task_id", "title"], unique: true)]),
    ]
}

/// Field validation per metadata (docs/protocol.md#errors): returns `fields[]` error entries.
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
