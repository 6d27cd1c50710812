/// A plain aligned table for human output: a header row and left-aligned columns separated by two
/// spaces. Headers and cells are sanitised (`ErrorPresenter.sanitize`) before they reach the terminal.
public struct Table: Sendable {
    public var headers: [String]
    public var rows: [[String]]

    public init(headers: [String], rows: [[String]] = []) {
        self.headers = headers
        self.rows = rows
    }

    public func render(terminal: Terminal? = nil) -> String {
        let clean = rows.map { $0.map { ErrorPresenter.sanitize($0, maxLength: 120) } }
        let headers = headers.map { ErrorPresenter.sanitize($0, maxLength: 60) }
        var widths = headers.map(\.count)
        for row in clean {
            for (index, cell) in row.enumerated() where index < widths.count {
                widths[index] = max(widths[index], cell.count)
            }
        }
        func line(_ cells: [String]) -> String {
            var parts: [String] = []
            for (index, cell) in cells.enumerated() {
                let last = index == cells.count - 1
                parts.append(last ? cell : cell + String(repeating: " ", count: widths[index] - cell.count))
            }
            return parts.joined(separator: "  ")
        }
        var output = line(headers.map { $0.uppercased() })
        if let terminal { output = terminal.bold(output) }
        output += "\n"
        for row in clean { output += line(row) + "\n" }
        return output
    }
}
