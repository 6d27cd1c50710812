import FoundationEssentials

/// An account id: `<host>::<userId>` (docs/storage.md), e.g. `crm.example.com::usr_9f2c`.
///
/// The host part is the server's authority (lower-case, `:port` only when not the scheme's
/// default). The user id is the server's opaque user id. Account ids appear in keyring attributes
/// and the registry; they contain no secret and no e-mail address.
public struct AccountID: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    public let rawValue: String

    public init(server: ServerURL, userID: String) throws(OStackError) {
        guard Self.isValidUserID(userID) else {
            throw OStackError(.unexpectedResponse, detail: "server returned an unusable user id")
        }
        rawValue = "\(server.authority)::\(userID)"
    }

    /// The id of an account scoped to an environment and/or organization: the scope is part of the
    /// host side (`crm.example.com/env:staging/org:acme::usr_9f2c`), so each scope is its own account.
    public init(server: ServerURL, userID: String, environment: String?, organization: String?) throws(OStackError) {
        var scoped = try AccountID(server: server, userID: userID).rawValue
        var scope = ""
        for (label, value) in [("env", environment), ("org", organization)] {
            guard let value else { continue }
            guard Self.isValidUserID(value), !value.contains("/"), value.count <= 100 else {
                throw OStackError(.invalidInput, detail: "unusable \(label) id")
            }
            scope += "/\(label):\(value)"
        }
        if !scope.isEmpty {
            scoped = server.authority + scope + "::" + userID
        }
        rawValue = scoped
    }

    /// Parses a stored id. Returns nil when it is not of the form `<host>::<userId>`.
    public init?(rawValue: String) {
        guard let separator = Self.separator(in: rawValue), separator.lowerBound != rawValue.startIndex else {
            return nil
        }
        let user = String(rawValue[separator.upperBound...])
        guard Self.isValidUserID(user) else { return nil }
        self.rawValue = rawValue
    }

    /// The `::` between host and user: the first one after an IPv6 literal's brackets
    /// (`[::1]:8080::usr_1`), whose own colons are part of the host.
    static func separator(in raw: String) -> Range<String.Index>? {
        var start = raw.startIndex
        if raw.hasPrefix("["), let close = raw.firstIndex(of: "]") { start = close }
        return raw[start...].firstRange(of: "::")
    }

    public var host: String { String(rawValue[..<Self.separator(in: rawValue)!.lowerBound]) }
    public var userID: String { String(rawValue[Self.separator(in: rawValue)!.upperBound...]) }
    public var description: String { rawValue }

    public static func < (lhs: AccountID, rhs: AccountID) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let raw = try container.decode(String.self)
        guard let id = AccountID(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "invalid account id")
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// Printable ASCII without whitespace or "::", at most 200 characters.
    static func isValidUserID(_ value: String) -> Bool {
        !value.isEmpty && value.count <= 200 && !value.contains("::")
            && value.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }
    }
}
