/// `ostack help <topic>` for topics that are not commands (swift-argument-parser's `help` knows only
/// commands): answered by `EarlyCommand` before the parser runs. The texts mirror docs/commands.md.
enum HelpTopics {
    /// The topic text for `help <topic>`, or nil when `arguments` is not a topic request.
    static func text(for arguments: [String]) -> String? {
        guard arguments.count == 2, arguments[0] == "help" else { return nil }
        switch arguments[1] {
        case "environment": return environment
        default: return nil
        }
    }

    /// Every environment variable ostack reads (docs/commands.md, "Environment variables").
    static let environment = """
        ENVIRONMENT
          OSTACK_ACCOUNT                the account for this process (below --account, above the default):
                                        its whole alias, id or e-mail address, not a prefix
          OSTACK_HOME                   one root for config, data, state and runtime files (absolute;
                                        a relative one is refused)
          XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_STATE_HOME, XDG_RUNTIME_DIR
                                        base directories when OSTACK_HOME is unset (relative values ignored)
          HOME                          base of the XDG defaults (else the password database's home)
          OSTACK_KEYRING_BACKEND        backend for new accounts: secret-service or file
                                        (--keyring > this > config keyring.backend > secret-service)
          OSTACK_KEYRING_PREFIX         keyring namespace prefix (default ostack); also names the agent
                                        socket and a non-default file-keyring file. An account's items
                                        serve one home: another home needs its own prefix to use it too
          OSTACK_KEYRING_TIMEOUT        deadline of each Secret Service call in seconds (default 5, at most 600)
          OSTACK_KEYRING_PASSPHRASE_FD  file descriptor the file backend reads its passphrase from
          OSTACK_PIN_KDF                interactive: Argon2id INTERACTIVE instead of MODERATE for new PINs
          OSTACK_METADATA_TTL           metadata cache lifetime in seconds (default 300)
          OSTACK_FAILPOINT              debug builds only: kill the process at a named point (tests)
          NO_COLOR, TERM                a non-empty NO_COLOR or TERM=dumb turns colours off
          COLUMNS                       the width tables fit into (default: the terminal's width)
          OSTACK_PAGER, PAGER, LESS     the pager for tables on a terminal (default less, LESS=FRX);
                                        empty or cat for none
          CURL_CA_BUNDLE, SSL_CERT_FILE certificate authorities to verify servers with, when the setting
                                        tls.ca-file is unset (as curl does)
          https_proxy, HTTPS_PROXY, all_proxy, ALL_PROXY, NO_PROXY
                                        the proxy for https servers, as curl reads them; never used for
                                        http or loopback servers (the credentials would pass in clear)
          LC_ALL, LC_MESSAGES, LANG     language of labels from the server when the setting locale is auto

        Secrets are never read from the environment: passwords, API keys, PINs, recovery keys and the
        file-keyring passphrase come from a prompt, stdin (--…-stdin) or a file descriptor.

        """
}
