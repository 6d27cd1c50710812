import SodiumKit

/// An object's definition as ostack uses it (docs/protocol.md#metadata), parsed from `GET /meta/object/<name>`.
/// Only names, labels and constraints are kept; descriptions and other free text are not.
public struct ObjectSchema: Sendable, Equatable {
    public var name: String
    public var label: String
    public var nameField: String?
    public var fields: [FieldSchema]

    public struct FieldSchema: Sendable, Equatable {
        public var name: String
        public var type: String
        public var label: String
        public var required = false
        public var readonly = false
        public var minLength: Int?
        public var maxLength: Int?
        public var min: Double?
        public var max: Double?
        public var scale: Int?
        public var options: [String] = []
        public var optionLabels: [String] = []

        public init(name: String, type: String, label: String) {
            self.name = name
            self.type = type
            self.label = label
        }
    }

    /// Columns the server injects into records (docs/protocol.md#records): always readable, never written.
    public static let systemFields: [String] = [
        "id", "created_at", "updated_at", "created_by", "updated_by", "owner_id", "owning_business_unit_id",
        "organization_id",
    ]

    public init(name: String, label: String, nameField: String?, fields: [FieldSchema]) {
        self.name = name
        self.label = label
        self.nameField = nameField
        self.fields = fields
    }

    /// A label: a string, or a locale map (`{"en": "Task", "de": "Aufgabe"}`) from which the entry of
    /// `preferredLocale` (or its language), else English, else the first is taken.
    static func text(_ value: JSONValue?) -> String? {
        if let text = value?.stringValue { return text }
        guard let map = value?.objectValue, !map.isEmpty else { return nil }
        let wanted = [preferredLocale, preferredLocale?.split(separator: "-").first.map(String.init), "en"]
        for key in wanted.compactMap({ $0 }) {
            if let text = map.first(where: { $0.key.lowercased() == key.lowercased() })?.value.stringValue {
                return text
            }
        }
        return map.sorted { $0.key < $1.key }.compactMap(\.value.stringValue).first
    }

    /// The user's locale for locale-map labels (set once per process from the `locale` setting).
    nonisolated(unsafe) public static var preferredLocale: String?

    /// A count from metadata (a length, a scale): a whole number from 0 up to 2^31, else nothing.
    static func count(_ value: JSONValue?) -> Int? {
        guard let number = value?.doubleValue, number.isFinite, number >= 0, number <= 2_147_483_647 else { return nil }
        return Int(number)
    }

    /// Parses a metadata `item`; `fields` is a name-keyed map (or, in older servers, an array).
    public init?(item: JSONValue) {
        guard let name = item["name"]?.stringValue, Self.isIdentifier(name) else { return nil }
        self.name = name
        label = Self.text(item["label"]) ?? name
        nameField = item["nameField"]?.stringValue
        var parsed: [FieldSchema] = []
        var entries: [(String, JSONValue)] = []
        if let map = item["fields"]?.objectValue {
            // In the order the server wrote them (kept by the metadata cache), else by name.
            let order = (item[Self.fieldOrderKey]?.arrayValue ?? []).compactMap(\.stringValue)
            let rank = Dictionary(order.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
            entries = map.sorted { (rank[$0.key] ?? Int.max, $0.key) < (rank[$1.key] ?? Int.max, $1.key) }
                .map { ($0.key, $0.value) }
        } else if let list = item["fields"]?.arrayValue {
            entries = list.compactMap { field in field["name"]?.stringValue.map { ($0, field) } }
        }
        for (key, field) in entries where Self.isIdentifier(key) {
            var schema = FieldSchema(
                name: key, type: field["type"]?.stringValue ?? "text", label: Self.text(field["label"]) ?? key)
            schema.required = field["required"]?.boolValue ?? false
            schema.readonly = field["readonly"]?.boolValue ?? false
            schema.minLength = Self.count(field["minLength"])
            schema.maxLength = Self.count(field["maxLength"])
            schema.min = field["min"]?.doubleValue.flatMap { $0.isFinite ? $0 : nil }
            schema.max = field["max"]?.doubleValue.flatMap { $0.isFinite ? $0 : nil }
            schema.scale = Self.count(field["scale"]).map { min($0, 30) }
            for option in field["options"]?.arrayValue ?? [] {
                if let value = option["value"]?.stringValue {
                    schema.options.append(value)
                    schema.optionLabels.append(Self.text(option["label"]) ?? value)
                } else if let value = option.stringValue {
                    schema.options.append(value)
                    schema.optionLabels.append(value)
                }
            }
            parsed.append(schema)
        }
        fields = parsed
    }

    public func field(_ name: String) -> FieldSchema? { fields.first { $0.name == name } }

    public func isKnown(_ name: String) -> Bool { Self.systemFields.contains(name) || field(name) != nil }

    /// All names a filter, sort or `--fields` may use.
    public var allFieldNames: [String] { Self.systemFields + fields.map(\.name) }

    /// A stable hash of the field set and constraints: a change means a new schema version.
    /// Where the metadata cache keeps the order of a `fields` map (`JSONKeyOrder`), which the
    /// parsed JSON does not.
    public static let fieldOrderKey = "ostack_field_order"

    /// A digest of the fields' constraints, independent of their order.
    public var fingerprint: String {
        let canonical = fields.sorted { $0.name < $1.name }.map { field in
            [
                field.name, field.type, field.required ? "r" : "", field.readonly ? "ro" : "",
                "\(field.minLength ?? -1)", "\(field.maxLength ?? -1)", "\(field.min ?? .nan)", "\(field.max ?? .nan)",
                "\(field.scale ?? -1)", field.options.joined(separator: "\u{1}"),
            ].joined(separator: "\u{2}")
        }.joined(separator: "\u{3}")
        return Hex.encode(BLAKE2b.hash(Array(canonical.utf8), length: 16))
    }

    /// Machine names ostack accepts from a server: they end up in URLs and index names.
    public static func isIdentifier(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy {
                ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 || ($0 >= 65 && $0 <= 90)
            }
    }

    /// The closest known field name to a mistyped one (edit distance ≤ 2, or a prefix match).
    public func suggestion(for name: String) -> String? {
        let lowered = name.lowercased()
        var best: (String, Int)?
        for candidate in allFieldNames {
            let distance = Self.editDistance(lowered, candidate.lowercased())
            if distance <= (candidate.count >= 4 ? 2 : 1), distance < (best?.1 ?? .max) { best = (candidate, distance) }
        }
        if let best { return best.0 }
        return allFieldNames.first { $0.hasPrefix(lowered) && lowered.count >= 3 }
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars)
        let b = Array(b.unicodeScalars)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = Swift.min(
                    previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
