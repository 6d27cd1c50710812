import OStackTestSupport
import Testing

/// Issue 17: `make install` puts the binary, the man page (with ENVIRONMENT, FILES, EXIT STATUS and
/// EXAMPLES) and the bash, zsh and fish completions where shells and man(1) find them;
/// `make uninstall` removes them. Runs `scripts/install.sh`, which both targets call, with the
/// binary under test (`make install` only adds the release build).
@Suite struct InstallEndToEndTests {
    static let root: String = {
        let file = #filePath
        return String(file[..<file.firstRange(of: "/Tests/")!.lowerBound])
    }()

    @Test func installPutsEverythingWhereItIsFoundAndUninstallRemovesIt() throws {
        let prefix = TemporaryDirectory()
        let install = try runProcess(
            executable: Self.root + "/scripts/install.sh", arguments: [prefix.path, OStackBinary.path])
        #expect(install.status == 0, "\(install.stderr)")
        let version = try runProcess(executable: prefix.appending("bin/ostack"), arguments: ["--version"])
        #expect(version.status == 0 && !version.stdout.isEmpty)

        let page = try runProcess(
            executable: "/usr/bin/man", arguments: ["-M", prefix.appending("share/man"), "ostack"],
            environment: ["PATH": "/usr/bin:/bin", "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "100"])
        #expect(page.status == 0, "\(page.stderr)")
        for section in ["NAME", "SYNOPSIS", "ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES", "SEE ALSO"] {
            #expect(page.stdout.contains("\n\(section)\n"), "man ostack has \(section)")
        }
        #expect(page.stdout.contains("OSTACK_ACCOUNT") && page.stdout.contains("ostack status --short"))

        for (file, marker) in [
            ("share/bash-completion/completions/ostack", "---completion"),
            ("share/zsh/site-functions/_ostack", "#compdef ostack"),
            ("share/fish/vendor_completions.d/ostack.fish", "complete -c 'ostack'"),
        ] {
            let text = try String(contentsOfFileLite: prefix.appending(file))
            #expect(text.contains(marker), "\(file)")
        }

        let uninstall = try runProcess(
            executable: Self.root + "/scripts/install.sh", arguments: ["--uninstall", prefix.path])
        #expect(uninstall.status == 0)
        let left = try runProcess(executable: "/usr/bin/find", arguments: [prefix.path, "-type", "f"])
        #expect(left.stdout.isEmpty, "left behind: \(left.stdout)")
    }

    /// The committed man page is the current command tree (regenerate with `make man`): every
    /// command appears in it.
    @Test func theManPageKnowsEveryCommand() throws {
        let page = try String(contentsOfFileLite: Self.root + "/docs/man/ostack.1")
        let help = try runProcess(executable: OStackBinary.path, arguments: ["--help"]).stdout
        // Command lines are indented two spaces; wrapped abstracts more.
        let commands = help.split(separator: "\n").drop { !$0.hasPrefix("SUBCOMMANDS:") }.dropFirst()
            .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") && !$0.hasPrefix("  See ") }
            .compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(commands.count > 20)
        for command in commands where command != "help" {
            #expect(page.contains(".It Em \(command)"), "docs/man/ostack.1 lacks \(command): run make man")
        }
        for section in ["ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES"] { #expect(page.contains(".Sh \(section)")) }
    }
}
