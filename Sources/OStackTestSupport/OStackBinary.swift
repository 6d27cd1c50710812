import Glibc

/// Locates the built `ostack` executable for end-to-end tests: `OSTACK_BIN` if set, otherwise the
/// `ostack` next to the running test binary (both live in the same build products directory,
/// whatever `--scratch-path` was used).
public enum OStackBinary {
    public static var path: String {
        if let explicit = ProcessInfoLite.environment("OSTACK_BIN") { return explicit }
        return productsDirectory + "/ostack"
    }

    /// The directory of the running executable (`/proc/self/exe`).
    public static var productsDirectory: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, Int(PATH_MAX))
        precondition(n > 0, "readlink(/proc/self/exe) failed")
        let exe = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // The XCTest bundle on Linux is an executable file inside the products directory.
        var directory = exe
        if let slash = directory.lastIndex(of: "/") { directory = String(directory[..<slash]) }
        return directory
    }
}
