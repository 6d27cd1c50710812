/// Metadata (docs/protocol.md#metadata): types, items, and one item with a strong ETag and 304.
extension DataStore {
    public func metaTypes() -> CoreResponse {
        CoreResponse(status: 200, body: .object([("types", .array([.string("object"), .string("app")]))]))
    }

    static func singular(_ type: String) -> String {
        type.hasSuffix("s") ? String(type.dropLast()) : type
    }

    /// `locale`: the request's preferred locale (first `Accept-Language` entry); labels are translated.
    public func metaItems(type: String, locale: String? = nil) -> CoreResponse {
        switch Self.singular(type) {
        case "object":
            return CoreResponse(
                status: 200, headers: [("Vary", "Accept-Language")],
                body: .object([
                    ("type", .string("object")), ("items", .array(objects.map { $0.metadata(locale: locale) })),
                ]))
        case "app":
            return CoreResponse(status: 200, body: .object([("type", .string("app")), ("items", .array(Self.apps))]))
        default:
            return .error(status: 404, code: "RESOURCE_NOT_FOUND", message: "Unknown metadata type \(type)")
        }
    }

    /// The preferred locale of an `Accept-Language` header: its first entry, without a quality;
    /// `*` or nothing is no preference (`preferredLocaleFromHeader`, spec `system/i18n-resolver.ts`).
    public static func preferredLocale(_ header: String?) -> String? {
        guard let header, !header.isEmpty else { return nil }
        let first = header.split(separator: ",", omittingEmptySubsequences: false).first ?? ""
        let top = (first.split(separator: ";", omittingEmptySubsequences: false).first.map(String.init) ?? "").trimmed()
        return top.isEmpty || top == "*" ? nil : top
    }

    public func metaItem(type: String, name: String, ifNoneMatch: String?, locale: String? = nil) -> CoreResponse {
        guard Self.singular(type) == "object" else {
            return .error(status: 404, code: "RESOURCE_NOT_FOUND", message: "Unknown metadata type \(type)")
        }
        guard let definition = definition(name) else { return objectNotFound(name) }
        let item = definition.metadata(locale: locale)
        // Like the real ETag, the hash covers the item and the locale it was translated for.
        let etag = "\"" + Self.hash(item.serialized() + Array((locale ?? "").utf8)) + "\""
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
