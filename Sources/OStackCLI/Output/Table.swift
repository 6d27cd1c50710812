/// Rows for people and for programs (docs/output.md). One table renders four ways:
/// - `table`: aligned columns for a terminal, fitted to its width; cells that do not fit end in `…`,
///   the first column (the key) is never cut while it fits, columns that do not fit are left out and counted;
/// - `tsv`: one line per row, cells separated by a tab, no padding (the default when stdout is not a terminal);
/// - `csv`: RFC 4180, fields quoted when they hold a comma or a quote;
/// - (`json` is each command's own document.)
/// Every header and cell is sanitised (`ErrorPresenter.sanitize`) first, in every format; tabs and
/// line breaks inside a value become spaces so that one row stays one line.
public struct Table: Sendable {
    public var headers: [String]
    public var rows: [[String]]

    public init(headers: [String], rows: [[String]] = []) {
        self.headers = headers
        self.rows = rows
    }

    /// The table in the format the terminal calls for: `table` on a terminal, `tsv` otherwise.
    public func render(terminal: Terminal? = nil) -> String {
        render(as: terminal?.defaultFormat ?? .table, terminal: terminal)
    }

    /// `render`, or `sentence` ("No conflicts.") instead of an empty aligned table. A line format
    /// (`tsv`, `csv` — also the default when stdout is not a terminal) gets its header line alone:
    /// a program reading it sees no row, never a sentence taken for one.
    public func render(terminal: Terminal?, whenEmpty sentence: String) -> String {
        let format = terminal?.defaultFormat ?? .table
        if rows.isEmpty && format != .tsv && format != .csv { return sentence }
        return render(as: format, terminal: terminal)
    }

    public func render(as format: OutputFormat, terminal: Terminal?) -> String {
        let headers = headers.map { Self.clean($0, maxLength: 60) }
        let rows = rows.map { $0.map { Self.clean($0, maxLength: 120) } }
        switch format {
        case .tsv, .csv:
            return Self.lines([headers] + rows, as: format)
        case .table, .json, .ndjson:
            return aligned(headers: headers, rows: rows, width: terminal?.width, terminal: terminal)
        }
    }

    /// The rows alone, without the header, in a line format (`tsv`, `csv`): for a listing written a
    /// row at a time after `render` wrote its header and first rows. Empty for the aligned formats.
    public func renderRows(as format: OutputFormat) -> String {
        Self.lines(rows.map { $0.map { Self.clean($0, maxLength: 120) } }, as: format)
    }

    /// Cleaned rows as `tsv` or `csv` lines (nothing for the other formats).
    private static func lines(_ rows: [[String]], as format: OutputFormat) -> String {
        switch format {
        case .tsv: rows.map { $0.joined(separator: "\t") + "\n" }.joined()
        case .csv: rows.map { $0.map(csvField).joined(separator: ",") + "\r\n" }.joined()
        case .table, .json, .ndjson: ""
        }
    }

    static func clean(_ text: String, maxLength: Int) -> String {
        let flattened =
            text.contains(where: { $0 == "\t" || $0.isNewline })
            ? String(text.map { $0 == "\t" || $0.isNewline ? " " : $0 }) : text
        return ErrorPresenter.sanitize(flattened, maxLength: maxLength)
    }

    /// RFC 4180: quoted when the value holds a comma, a quote, a line break or edge spaces (a
    /// table's cells have no line breaks; an export's values may).
    /// Decided on Unicode scalars, not characters: a `,` or `"` followed by a combining mark is one
    /// Swift character, but a CSV reader still sees the comma or the quote.
    static func csvField(_ text: String) -> String {
        guard csvNeedsQuotes(text.utf8) else { return text }
        let scalars = text.unicodeScalars
        var quoted = String.UnicodeScalarView()
        quoted.append("\"")
        for scalar in scalars {
            if scalar == "\"" { quoted.append("\"") }
            quoted.append(scalar)
        }
        quoted.append("\"")
        return String(quoted)
    }

    /// Whether a CSV cell must be quoted: it holds a comma, a quote or a line break, or starts or
    /// ends with a space. On UTF-8 bytes (ASCII bytes never occur inside a multi-byte character,
    /// so this is the test on Unicode scalars), for the export's byte path as well.
    static func csvNeedsQuotes<Bytes: Collection>(_ utf8: Bytes) -> Bool where Bytes.Element == UInt8 {
        guard let first = utf8.first else { return false }
        if first == UInt8(ascii: " ") { return true }
        var last = first
        for byte in utf8 {
            if byte == UInt8(ascii: ",") || byte == UInt8(ascii: "\"") || byte == 0x0A || byte == 0x0D { return true }
            last = byte
        }
        return last == UInt8(ascii: " ")
    }

    private func aligned(headers: [String], rows: [[String]], width: Int?, terminal: Terminal?) -> String {
        let headers = headers.map { $0.uppercased() }
        var widths = headers.map(DisplayWidth.of)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count {
                widths[index] = max(widths[index], DisplayWidth.of(cell))
            }
        }
        if let width { widths = Self.fit(widths, into: width) }
        let shown = widths.indices.filter { widths[$0] > 0 }
        func line(_ cells: [String]) -> String {
            let columns = shown.filter { $0 < cells.count }
            var text = ""
            for index in columns {
                let fitted = DisplayWidth.truncate(cells[index], to: widths[index])
                text += fitted
                if index != columns.last {
                    text += String(repeating: " ", count: widths[index] - DisplayWidth.of(fitted) + 2)
                }
            }
            return text
        }
        var output = line(headers)
        if let terminal { output = terminal.bold(output) }
        output += "\n"
        for row in rows { output += line(row) + "\n" }
        let hidden = widths.count - shown.count
        if hidden > 0 {
            let whole = "\(hidden) column\(hidden == 1 ? "" : "s") not shown: use --format tsv"
            let note = width.map { DisplayWidth.truncate(whole, to: $0) } ?? whole
            output += (terminal.map { $0.dim(note) } ?? note) + "\n"
        }
        return output
    }

    /// The narrowest a column is worth showing: six columns (`Seed …`), or its natural width.
    static let minimumShown = 6

    /// Column widths that fit `total` columns with two spaces between columns. The first column
    /// (the key: an id, an alias) keeps its whole width when it fits: a cut id is no id. Columns on
    /// the right that cannot have `minimumShown` columns each are left out (width 0; the table says
    /// how many). Of the rest, columns narrower than a fair share keep their width and the others
    /// share what is left.
    static func fit(_ natural: [Int], into total: Int) -> [Int] {
        let gaps = 2 * max(0, natural.count - 1)
        guard natural.reduce(0, +) + gaps > total, !natural.isEmpty else { return natural }
        var widths = natural
        func need(_ index: Int) -> Int { 2 + min(natural[index], minimumShown) }
        // The key whole, with room for at least the next column; else the key alone, cut to fit.
        guard natural.count > 1, natural[0] + need(1) <= total else {
            return [max(1, min(natural[0], total))] + Array(repeating: 0, count: natural.count - 1)
        }
        var remaining = total - natural[0]
        var open = Array(natural.indices.dropFirst())
        while open.map(need).reduce(0, +) > remaining { widths[open.removeLast()] = 0 }
        remaining -= 2 * open.count
        while !open.isEmpty {
            let share = remaining / open.count
            let small = open.filter { natural[$0] <= share }
            if small.isEmpty { break }
            for index in small { remaining -= natural[index] }
            open.removeAll { small.contains($0) }
        }
        guard !open.isEmpty else { return widths }
        let share = remaining / open.count
        var extra = remaining - share * open.count
        for index in open {
            widths[index] = share + (extra > 0 ? 1 : 0)
            extra -= 1
        }
        return widths
    }
}

/// The output formats of list commands (`--format`).
public enum OutputFormat: String, Sendable, CaseIterable {
    case table, tsv, csv, json
    /// One JSON object per line (`records export` and `records import`; other commands print their JSON document).
    case ndjson
}

/// Terminal columns a string takes: East Asian wide and emoji characters take two, combining
/// marks and zero-width characters none (a close approximation of wcwidth for the common cases).
enum DisplayWidth {
    static func of(_ text: String) -> Int {
        var width = 0
        for character in text { width += of(character) }
        return width
    }

    static func of(_ character: Character) -> Int {
        guard let first = character.unicodeScalars.first?.value else { return 0 }
        if first < 0x300 { return 1 }
        if (0x300...0x36F).contains(first) || (0x200B...0x200D).contains(first) || first == 0xFEFF { return 0 }
        if (0x1100...0x115F).contains(first) || (0x2E80...0xA4CF).contains(first) || (0xAC00...0xD7A3).contains(first)
            || (0xF900...0xFAFF).contains(first) || (0xFE30...0xFE4F).contains(first)
            || (0xFF00...0xFF60).contains(first) || (0xFFE0...0xFFE6).contains(first)
            || (0x1F300...0x1F64F).contains(first) || (0x1F900...0x1F9FF).contains(first)
            || (0x20000...0x3FFFD).contains(first)
        {
            return 2
        }
        return 1
    }

    /// `text` cut to at most `width` columns, ending in `…` when something was cut.
    static func truncate(_ text: String, to width: Int) -> String {
        guard of(text) > width else { return text }
        guard width > 1 else { return width == 1 ? "…" : "" }
        var result = ""
        var used = 0
        for character in text {
            let size = of(character)
            if used + size > width - 1 { break }
            result.append(character)
            used += size
        }
        return result + "…"
    }
}
