import FoundationEssentials

/// Decodes the test server's JSON into plain dictionaries.
enum JSONSerializationLite {
    struct Echo: Decodable {
        var method: String?
        var path: String?
        var headers: [String: String]?
        var body: String?
        var connections: Int?
        var drops: Int?
    }

    static func object(_ bytes: [UInt8]) throws -> [String: Any] {
        let echo = try JSONDecoder().decode(Echo.self, from: Data(bytes))
        var result: [String: Any] = [:]
        if let method = echo.method { result["method"] = method }
        if let path = echo.path { result["path"] = path }
        if let headers = echo.headers { result["headers"] = headers }
        if let body = echo.body { result["body"] = body }
        if let connections = echo.connections { result["connections"] = connections }
        if let drops = echo.drops { result["drops"] = drops }
        return result
    }
}
