/// Metadata (PROTOCOL §4): types, items, and one item with a strong ETag and 304.
extension DataStore {
    public func metaTypes() -> CoreResponse {
        CoreResponse(status: 200, body: .object([("types", .array([.string("object"), .string("app")]))]))
    }

    static func singular(_ type: String) -> String {
        type.hasSuffix("s") ? String(type.dropLast()) : type
    }

    public func metaItems(type: String) -> CoreResponse {
        switch Self.singular(type) {
        case "object":
            return CoreResponse(
                status: 200, body: .object([("type", .string("object")), ("items", .array(objects.map(\.metadata)))]))
        case "app":
            return CoreResponse(status: 200, body: .object([("type", .string("app")), ("items", .array(Self.apps))]))
        default:
            return .error(status: 404, code: "RESOURCE_NOT_FOUND", message: "Unknown metadata type \(type)")
        }
    }

    public func metaItem(type: String, name: String, ifNoneMatch: String?) -> CoreResponse {
        guard Self.singular(type) == "object" else {
            return .error(status: 404, code: "RESOURCE_NOT_FOUND", message: "Unknown metadata type \(type)")
        }
        guard let definition = definition(name) else { return objectNotFound(name) }
        let item = definition.metadata
        let etag = "\"" + Self.hash(item.serialized()) + "\""
        let headers = [("ETag", etag), ("Cache-Control", "private, no-cache"), ("Vary", "Accept-Language")]
        if let ifNoneMatch {
            let candidates = ifNoneMatch.split(separator: ",").map { DataStore.normalizeVersion(String($0)) }
            if candidates.contains(DataStore.normalizeVersion(etag)) || candidates.contains("*") {
                return CoreResponse(status: 304, headers: headers, body: nil)
            }
        }
        return CoreResponse(
            status: 200, headers: headers,
            body: .object([
                ("type", .string("object")), ("name", .string(name)), ("item", item),
            ]))
    }

    public func apps() -> CoreResponse {
        CoreResponse(status: 200, body: .object([("apps", .array(Self.apps))]))
    }

    static let apps: [JSONValue] = [
        .object([
            ("name", .string("crm")), ("label", .string("CRM")), ("active", .bool(true)), ("isDefault", .bool(true)),
        ]),
        .object([
            ("name", .string("projects")), ("label", .string("Projects")), ("active", .bool(true)),
            ("isDefault", .bool(false)),
        ]),
    ]

    /// FNV-1a 64-bit, hex (a content hash for ETags; not security-relevant).
    static func hash(_ bytes: [UInt8]) -> String {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            value ^= UInt64(byte)
            value = value &* 0x100_0000_01b3
        }
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
