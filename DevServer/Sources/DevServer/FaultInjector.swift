import DevServerCore
import Synchronization

/// Faults injected through `POST /__control__/faults` for the next N matching requests.
final class FaultInjector: @unchecked Sendable {
    // @unchecked Sendable: rules are behind the mutex.
    enum Action: String {
        case status, delay
        case dropBefore = "drop-before"
        case dropAfter = "drop-after"
        /// Carries the request out, then answers with `status` and `body`/`text` instead of the
        /// real answer (a success without proof, a lying server).
        case answerAfter = "answer-after"
    }

    struct Rule {
        var method: String?
        var pathPrefix: String?
        /// A query parameter the request must carry (`name` or `name=value`).
        var query: String?
        var remaining: Int
        /// Matching requests let through before the fault applies (a failure part-way through).
        var skip = 0
        var action: Action
        var status = 503
        var retryAfter: Int?
        var delayMilliseconds = 0
        var body: JSONValue?
        /// A raw body (not JSON), sent with `contentType`.
        var text: String?
        var contentType: String?
        /// Extra response headers (e.g. `Location` for a redirect).
        var headers: [(String, String)] = []
    }

    let rules = Mutex<[Rule]>([])

    /// Parses `{"match":{"method","pathPrefix","query"},"count","skip","action","status","retryAfter","delayMs","body",
    /// "text","contentType"}`.
    func add(_ json: JSONValue) -> Bool {
        guard let actionName = json["action"]?.stringValue, let action = Action(rawValue: actionName) else {
            return false
        }
        var rule = Rule(
            method: json["match"]?["method"]?.stringValue?.uppercased(),
            pathPrefix: json["match"]?["pathPrefix"]?.stringValue, query: json["match"]?["query"]?.stringValue,
            remaining: Int(json["count"]?.numberValue ?? 1), action: action)
        if let skip = json["skip"]?.numberValue, skip >= 0, skip < 1_000_000 { rule.skip = Int(skip) }
        if let status = json["status"]?.numberValue { rule.status = Int(status) }
        if let retry = json["retryAfter"]?.numberValue { rule.retryAfter = Int(retry) }
        if let delay = json["delayMs"]?.numberValue { rule.delayMilliseconds = Int(delay) }
        rule.body = json["body"]
        rule.text = json["text"]?.stringValue
        rule.contentType = json["contentType"]?.stringValue
        if case .object(let members)? = json["headers"] {
            rule.headers = members.compactMap { name, value in value.stringValue.map { (name, $0) } }
        }
        rules.withLock { $0.append(rule) }
        return true
    }

    func clear() { rules.withLock { $0.removeAll() } }

    /// The fault for this request, consuming one use of the first matching rule.
    func take(method: String, path: String, query: [(String, String)] = []) -> Rule? {
        rules.withLock { rules in
            guard
                let index = rules.firstIndex(where: { rule in
                    (rule.method == nil || rule.method == method)
                        && (rule.pathPrefix.map { path.hasPrefix($0) } ?? true)
                        && (rule.query.map { wanted in
                            query.contains { $0.0 == wanted || "\($0.0)=\($0.1)" == wanted }
                        } ?? true)
                        && rule.remaining > 0
                })
            else { return nil }
            if rules[index].skip > 0 {
                rules[index].skip -= 1
                return nil
            }
            rules[index].remaining -= 1
            let rule = rules[index]
            if rules[index].remaining == 0 { rules.remove(at: index) }
            return rule
        }
    }
}
