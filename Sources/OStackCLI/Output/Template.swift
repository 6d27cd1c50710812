import OStackCore

/// `--template TEXT`: the command's JSON document rendered through a small template language in
/// the style of Go's text/template, which gh users know (docs/output.md, "Filtering"):
///
/// - `{{.}}` the current value, `{{.name}}` / `{{.a.b}}` a member of it;
/// - `{{range .records}}…{{end}}` once per element of an array (`.` is the element);
/// - `{{if .field}}…{{else}}…{{end}}` on a value that is present, not null, not false, not 0 and not empty;
/// - `{{"text"}}` a string literal (`\n` and `\t` escapes), e.g. `{{"\n"}}`.
///
/// Strings print as they are, numbers without a needless `.0`, objects and arrays as JSON. The result
/// is sanitised like every other output (control characters and escape sequences removed; tabs and
/// line breaks kept).
struct Template {
    indirect enum Node {
        case text(String)
        case value([String])
        case literal(String)
        case range([String], [Node])
        case condition([String], [Node], [Node])
    }

    struct ParseError: Error { var message: String }

    let nodes: [Node]

    init(_ source: String) throws(ParseError) {
        var tokens = try Self.tokenize(source)[...]
        nodes = try Self.parse(&tokens, until: [])
        if let extra = tokens.first { throw ParseError(message: "unexpected {{\(extra)}}") }
    }

    func render(_ value: JSONValue) -> String {
        var output = ""
        Self.render(nodes, value, into: &output)
        return output
    }

    // MARK: Parsing

    enum Token: CustomStringConvertible {
        case text(String)
        case action(String)
        var description: String {
            switch self {
            case .text(let text): text
            case .action(let action): action
            }
        }
    }

    static func tokenize(_ source: String) throws(ParseError) -> [Token] {
        var tokens: [Token] = []
        var rest = Substring(source)
        while let open = rest.firstRange(of: "{{") {
            if open.lowerBound > rest.startIndex { tokens.append(.text(String(rest[..<open.lowerBound]))) }
            guard let close = rest[open.upperBound...].firstRange(of: "}}") else {
                throw ParseError(message: "a {{ without its }}")
            }
            tokens.append(.action(String(rest[open.upperBound..<close.lowerBound]).trimmingWhitespace()))
            rest = rest[close.upperBound...]
        }
        if !rest.isEmpty { tokens.append(.text(String(rest))) }
        return tokens
    }

    static func parse(_ tokens: inout ArraySlice<Token>, until ends: Set<String>) throws(ParseError) -> [Node] {
        var nodes: [Node] = []
        while let token = tokens.first {
            switch token {
            case .text(let text):
                tokens.removeFirst()
                nodes.append(.text(text))
            case .action(let action):
                if ends.contains(action) { return nodes }
                tokens.removeFirst()
                if action.hasPrefix("range ") {
                    let path = try Self.path(String(action.dropFirst(6)))
                    let body = try parse(&tokens, until: ["end"])
                    try expect("end", &tokens)
                    nodes.append(.range(path, body))
                } else if action.hasPrefix("if ") {
                    let path = try Self.path(String(action.dropFirst(3)))
                    let then = try parse(&tokens, until: ["else", "end"])
                    var otherwise: [Node] = []
                    if case .action("else")? = tokens.first {
                        tokens.removeFirst()
                        otherwise = try parse(&tokens, until: ["end"])
                    }
                    try expect("end", &tokens)
                    nodes.append(.condition(path, then, otherwise))
                } else if action.hasPrefix("\"") {
                    nodes.append(.literal(try literal(action)))
                } else if action == "end" || action == "else" {
                    throw ParseError(message: "{{\(action)}} without {{range}} or {{if}}")
                } else {
                    nodes.append(.value(try Self.path(action)))
                }
            }
        }
        if !ends.isEmpty { throw ParseError(message: "missing {{end}}") }
        return nodes
    }

    static func expect(_ action: String, _ tokens: inout ArraySlice<Token>) throws(ParseError) {
        guard case .action(let found)? = tokens.first, found == action else {
            throw ParseError(message: "missing {{\(action)}}")
        }
        tokens.removeFirst()
    }

    /// `.`, `.a`, `.a.b` → the member names.
    static func path(_ text: String) throws(ParseError) -> [String] {
        let text = text.trimmingWhitespace()
        guard text.hasPrefix(".") else { throw ParseError(message: "'\(text)' is not a field such as .name") }
        if text == "." { return [] }
        let names = text.dropFirst().split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard
            names.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" } })
        else { throw ParseError(message: "'\(text)' is not a field such as .name") }
        return names
    }

    static func literal(_ action: String) throws(ParseError) -> String {
        guard action.count >= 2, action.hasSuffix("\"") else { throw ParseError(message: "an unterminated string") }
        var result = ""
        var escaped = false
        for character in action.dropFirst().dropLast() {
            if escaped {
                result.append(character == "n" ? "\n" : character == "t" ? "\t" : character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else {
                result.append(character)
            }
        }
        return result
    }

    // MARK: Rendering

    static func lookup(_ path: [String], in value: JSONValue) -> JSONValue? {
        var current: JSONValue? = value
        for name in path { current = current?[name] }
        return current
    }

    static func isTrue(_ value: JSONValue?) -> Bool {
        switch value {
        case nil, .null?: false
        case .bool(let flag)?: flag
        case .number(let number)?: number != 0
        case .string(let text)?: !text.isEmpty
        case .array(let items)?: !items.isEmpty
        case .object(let members)?: !members.isEmpty
        }
    }

    static func render(_ nodes: [Node], _ value: JSONValue, into output: inout String) {
        for node in nodes {
            switch node {
            case .text(let text): output += text
            case .literal(let text): output += text
            case .value(let path): output += lookup(path, in: value).map(RecordText.text) ?? ""
            case .range(let path, let body):
                for element in lookup(path, in: value)?.arrayValue ?? [] { render(body, element, into: &output) }
            case .condition(let path, let then, let otherwise):
                render(isTrue(lookup(path, in: value)) ? then : otherwise, value, into: &output)
            }
        }
    }
}
