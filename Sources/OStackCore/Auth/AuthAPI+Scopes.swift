import FoundationEssentials
import SodiumKit

/// Environments and organizations of a server (docs/protocol.md, "Authentication").
extension AuthAPI {
    /// The discovery document of one environment (`{base}/environments/ID/discovery`): its scoped
    /// routes. An environment the server does not have → `invalid-input`.
    public func discoverEnvironment(_ id: String) throws(OStackError) -> Discovery {
        guard ServerRoutes.isPlainPath("/" + id), !id.contains("/") else {
            throw OStackError(
                .invalidInput, context: .init(suggestion: "An environment id is letters, digits, - and _."))
        }
        let response = try send(
            TransportRequest(
                method: "GET", url: server.url(routes.base + "/environments/" + id + "/discovery"),
                headers: [("Accept", "application/json")]))
        guard response.status == 200, let discovery = Discovery(document: JSONValue.parse(response.body)) else {
            if response.status == 404 {
                throw OStackError(
                    .invalidInput,
                    context: .init(host: server.authority, suggestion: "The server has no such environment."),
                    detail: "unknown environment")
            }
            throw ServerError(response: response).asOStackError(account: nil, host: server.authority)
        }
        return discovery
    }

    /// `POST {auth}/organization/set-active`: the session's active organization.
    public func setActiveOrganization(_ id: String, token: SessionCredential) throws(OStackError) {
        var body = Array("{\"organizationId\":".utf8)
        body += Self.jsonString(Array(id.utf8))
        body += Array("}".utf8)
        let response = try send(
            TransportRequest(
                method: "POST", url: server.url(routes.auth + "/organization/set-active"),
                headers: [
                    Self.authorization(token), ("Content-Type", "application/json"), ("Accept", "application/json"),
                ],
                body: body))
        switch response.status {
        case 200..<300: return
        case 400, 403, 404:
            throw OStackError(
                .invalidInput,
                context: .init(host: server.authority, suggestion: "You are not a member of that organization."),
                detail: "set-active refused")
        default: throw ServerError(response: response).asOStackError(account: nil, host: server.authority)
        }
    }

    /// `GET {auth}/organization/list`: the organizations of the session's user (id and name).
    public func organizations(token: SessionCredential) throws(OStackError) -> [(id: String, name: String)] {
        let response = try send(
            TransportRequest(
                method: "GET", url: server.url(routes.auth + "/organization/list"),
                headers: [Self.authorization(token), ("Accept", "application/json")]))
        guard response.status == 200 else {
            throw ServerError(response: response).asOStackError(account: nil, host: server.authority)
        }
        guard let list = JSONValue.parse(response.body)?.arrayValue else {
            throw OStackError(.unexpectedResponse, context: .init(host: server.authority), detail: "organization list")
        }
        return list.compactMap { item in
            guard let id = item["id"]?.stringValue, AccountID.isValidUserID(id), id.count <= 100 else { return nil }
            return (id, item["name"]?.stringValue ?? id)
        }
    }
}
