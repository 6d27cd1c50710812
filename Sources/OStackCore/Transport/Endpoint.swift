/// Every data and metadata route the client calls, as a value: the method and the path are derived
/// here, against the account's `ServerRoutes` (from its discovery document), and nowhere else.
public enum Endpoint: Sendable, Equatable {
    case discovery
    case list(object: String)
    case getRecord(object: String, id: String)
    case create(object: String)
    case updateRecord(object: String, id: String)
    case deleteRecord(object: String, id: String)
    case createMany(object: String)
    case updateMany(object: String)
    case deleteMany(object: String)
    /// `GET {metadata}/object`: every object's metadata.
    case objects
    /// `GET {metadata}/object/{name}`.
    case objectMetadata(name: String)
    /// `GET /me/apps` (under the API base): the apps the user may enter.
    case apps

    public var method: String {
        switch self {
        case .create, .createMany, .updateMany, .deleteMany: "POST"
        case .updateRecord: "PATCH"
        case .deleteRecord: "DELETE"
        default: "GET"
        }
    }

    public func path(_ routes: ServerRoutes) -> String {
        func data(_ object: String) -> String { routes.data + "/" + DataAPI.percentEncode(object) }
        switch self {
        case .discovery: return routes.discovery
        case .list(let object), .create(let object): return data(object)
        case .getRecord(let object, let id), .updateRecord(let object, let id), .deleteRecord(let object, let id):
            return data(object) + "/" + DataAPI.percentEncode(id)
        case .createMany(let object): return data(object) + "/createMany"
        case .updateMany(let object): return data(object) + "/updateMany"
        case .deleteMany(let object): return data(object) + "/deleteMany"
        case .objects: return routes.metadata + "/object"
        case .objectMetadata(let name): return routes.metadata + "/object/" + DataAPI.percentEncode(name)
        case .apps: return routes.base + "/me/apps"
        }
    }
}

/// Where a server keeps its routes: its discovery document's `routes`, each an absolute path on the
/// server's origin, falling back to ObjectStack's defaults under `/api/v1`.
public struct ServerRoutes: Sendable, Equatable, Codable {
    public var base = "/api/v1"
    public var data = "/api/v1/data"
    public var metadata = "/api/v1/meta"
    public var auth = "/api/v1/auth"
    public var discovery = "/api/v1/discovery"

    public init() {}

    /// Routes from a discovery document (bare, or wrapped in `data`). A route that is not a plain
    /// absolute path is ignored (the default stays).
    public init(discovery document: JSONValue?) {
        let routes = (document?["data"] ?? document)?["routes"]
        func pick(_ key: String, _ fallback: String) -> String {
            guard let path = routes?[key]?.stringValue, Self.isPlainPath(path) else { return fallback }
            return path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        }
        data = pick("data", data)
        metadata = pick("metadata", metadata)
        auth = pick("auth", auth)
        discovery = pick("discovery", discovery)
        // The API base is the data route's parent (`/api/v1` for `/api/v1/data`).
        if let slash = data.lastIndex(of: "/"), slash != data.startIndex { base = String(data[..<slash]) }
    }

    /// `/segment/segment…` of RFC 3986 unreserved characters only: no scheme, host, query or `..`.
    static func isPlainPath(_ path: String) -> Bool {
        guard path.hasPrefix("/"), path.count <= 200, !path.contains("//"), !path.contains("/../"),
            !path.hasSuffix("/..")
        else { return false }
        return path.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                || "/-._~".unicodeScalars.contains($0)
        }
    }
}

/// What ostack reads from a server's discovery document: its routes and capabilities.
public struct Discovery: Sendable, Equatable {
    public var routes: ServerRoutes
    /// `capabilities.conditionalBatch`: the server honours per-row versions in `updateMany` and
    /// `deleteMany`. No ObjectStack release has it (its bulk routes drop them); only
    /// `ostack-devserver --conditional-batch` does.
    public var conditionalBatch: Bool

    public init(routes: ServerRoutes = ServerRoutes(), conditionalBatch: Bool = false) {
        self.routes = routes
        self.conditionalBatch = conditionalBatch
    }

    /// Reads a discovery document (bare, or wrapped in `data`); nil when it is not one (it needs
    /// `routes.data` and `routes.metadata`).
    public init?(document json: JSONValue?) {
        let document = json?["data"] ?? json
        guard let routes = document?["routes"], routes["data"]?.stringValue != nil,
            routes["metadata"]?.stringValue != nil
        else { return nil }
        self.routes = ServerRoutes(discovery: document)
        // Capabilities are `{"enabled": bool}` objects on ObjectStack; a bare boolean is accepted too.
        let capability = document?["capabilities"]?["conditionalBatch"]
        conditionalBatch = capability?["enabled"]?.boolValue ?? capability?.boolValue ?? false
    }
}
