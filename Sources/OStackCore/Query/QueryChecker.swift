/// Checks a filter, a sort and a field list against cached metadata (docs/filters.md): unknown fields are
/// refused with a suggestion, and operators must suit the field's type (`operatorsForFieldType`).
public struct QueryChecker: Sendable {
    public let schema: ObjectSchema

    public init(schema: ObjectSchema) {
        self.schema = schema
    }

    /// The operators a field type supports.
    public static func operators(forFieldType type: String) -> Set<FilterCondition.Operator> {
        let presence: Set<FilterCondition.Operator> = [.null, .exists]
        switch type {
        case "number", "currency", "percent", "rating", "slider", "progress", "autonumber", "date", "datetime", "time":
            return presence.union([.eq, .ne, .gt, .gte, .lt, .lte, .in, .nin, .between])
        case "boolean", "toggle":
            return presence.union([.eq, .ne])
        case "select", "radio", "lookup", "master_detail", "user", "tree":
            return presence.union([.eq, .ne, .in, .nin])
        case "multiselect", "checkboxes", "tags", "json", "composite", "repeater", "record", "location", "address",
            "vector", "image", "file", "avatar", "video", "audio":
            return presence.union([.contains, .notContains])
        default:  // text-like
            return presence.union([
                .eq, .ne, .gt, .gte, .lt, .lte, .in, .nin, .between, .contains, .icontains, .notContains, .startsWith,
                .endsWith, .like, .ilike,
            ])
        }
    }

    static let systemFieldTypes: [String: String] = [
        "id": "text", "created_at": "datetime", "updated_at": "datetime", "created_by": "user", "updated_by": "user",
        "owner_id": "user", "owning_business_unit_id": "lookup", "organization_id": "lookup",
    ]

    /// Every field's type, system fields included.
    public var fieldTypes: [String: String] {
        var types = Self.systemFieldTypes
        for field in schema.fields { types[field.name] = field.type }
        return types
    }

    func type(of name: String) -> String? {
        schema.field(name)?.type ?? Self.systemFieldTypes[name]
    }

    public func check(_ condition: FilterCondition) throws(OStackError) {
        switch condition {
        case .all(let children), .any(let children):
            for child in children { try check(child) }
        case .not(let child): try check(child)
        case .constant: return
        case .compare(let field, let op, let operand):
            try requireKnown(field)
            if case .field(let other) = operand { try requireKnown(other) }
            let type = type(of: field) ?? "text"
            guard Self.operators(forFieldType: type).contains(op) else {
                let label = schema.field(field)?.label ?? field
                throw OStackError(
                    .invalidFilter,
                    context: .init(
                        object: schema.name, fields: [field],
                        suggestion: "\(label) is a \(type) field; it does not take '\(Self.spelling(op))'."),
                    detail: "operator \(op) on \(type)")
            }
        }
    }

    /// A field of a filter (`invalid-filter`), or of the option `option` names (`--sort`,
    /// `--fields`: `invalid-input`, the hint naming the option: not "the filter is not valid").
    public func requireKnown(_ field: String, option: String? = nil) throws(OStackError) {
        guard !schema.isKnown(field) else { return }
        let hint: Wording =
            schema.suggestion(for: field).map { "Unknown field '\(field)'. Did you mean '\($0)'?" }
            ?? "Unknown field '\(field)'. See \(command: .objectsShow(object: schema.name))."
        guard let option else {
            throw OStackError(
                .invalidFilter, context: .init(object: schema.name, fields: [field], suggestion: hint),
                detail: "unknown field")
        }
        throw OStackError(
            .invalidInput, context: .init(object: schema.name, fields: [field], suggestion: "\(option): \(hint)"),
            detail: "unknown field in \(option)")
    }

    static func spelling(_ op: FilterCondition.Operator) -> String {
        switch op {
        case .eq: "="
        case .ne: "!="
        case .gt: ">"
        case .gte: ">="
        case .lt: "<"
        case .lte: "<="
        case .in: "in"
        case .nin: "not in"
        case .contains: "contains"
        case .icontains: "icontains"
        case .notContains: "not contains"
        case .startsWith: "starts with"
        case .endsWith: "ends with"
        case .like: "like"
        case .ilike: "ilike"
        case .between: "between"
        case .null: "is null"
        case .exists: "exists"
        }
    }
}

/// `--sort a,-b` (docs/protocol.md, "Records": comma list of `field` / `-field`).
public struct SortKey: Sendable, Equatable {
    public var field: String
    public var descending: Bool

    public static func parse(_ text: String) throws(OStackError) -> [SortKey] {
        var keys: [SortKey] = []
        for part in text.split(separator: ",") {
            var name = String(part).trimmingWhitespace()
            let descending = name.hasPrefix("-")
            if descending || name.hasPrefix("+") { name.removeFirst() }
            guard ObjectSchema.isIdentifier(name) else {
                throw OStackError(
                    .invalidInput, context: .init(suggestion: "Sort by field names, e.g. --sort status,-updated_at."),
                    detail: "bad sort")
            }
            keys.append(SortKey(field: name, descending: descending))
        }
        return keys
    }

    public var wire: String { (descending ? "-" : "") + field }
}
