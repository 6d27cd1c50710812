/// A value bound to or read from SQLite. Texts are equal when their bytes are, as SQLite compares
/// them (Swift's `==` on strings takes a decomposed "é" for a composed one).
public enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    public static func == (a: SQLValue, b: SQLValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.integer(let x), .integer(let y)): x == y
        case (.real(let x), .real(let y)): x == y
        case (.text(let x), .text(let y)): x.utf8.elementsEqual(y.utf8)
        case (.blob(let x), .blob(let y)): x == y
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .integer(let value): hasher.combine(1); hasher.combine(value)
        case .real(let value): hasher.combine(2); hasher.combine(value)
        case .text(let value): hasher.combine(3); hasher.combine(value)
        case .blob(let value): hasher.combine(4); hasher.combine(value)
        }
    }
}

extension SQLValue: ExpressibleByNilLiteral, ExpressibleByIntegerLiteral, ExpressibleByStringLiteral,
    ExpressibleByFloatLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(stringLiteral value: String) { self = .text(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
}
