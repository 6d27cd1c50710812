import Glibc
import OStackTestSupport
import PlatformKit
import Testing

@Suite struct ProcessHardeningTests {
    @Test func applyTightensTheProcess() {
        ProcessHardening.apply()
        let status = ProcessHardening.status()
        #expect(status.umask == 0o077)
        #expect(!status.dumpable)
        #expect(status.coreLimit == 0)
    }
}

@Suite struct SecureFileSystemTests {
    let directory = TemporaryDirectory()

    @Test func nestedDirectoriesArePrivate() throws {
        let nested = directory.appending("a/b/c")
        try SecureFileSystem.createDirectory(nested)
        for path in [directory.appending("a"), directory.appending("a/b"), nested] {
            #expect(SecureFileSystem.mode(of: path) == 0o700)
        }
        try SecureFileSystem.createDirectory(nested)  // idempotent
    }

    @Test func atomicWritesArePrivateAndReplaceContent() throws {
        let path = directory.appending("file.json")
        let previous = umask(0o022)  // even with a permissive umask
        defer { umask(previous) }
        try SecureFileSystem.writeAtomically(Array("one".utf8), to: path)
        try SecureFileSystem.writeAtomically(Array("two".utf8), to: path)
        #expect(try SecureFileSystem.readFile(path) == Array("two".utf8))
        #expect(SecureFileSystem.mode(of: path) == 0o600)
        #expect(try SecureFileSystem.contentsOfDirectory(directory.path) == ["file.json"])
    }

    @Test func missingFilesReadAsNilAndRemoveQuietly() throws {
        #expect(try SecureFileSystem.readFile(directory.appending("missing")) == nil)
        try SecureFileSystem.removeFile(directory.appending("missing"))
        try SecureFileSystem.removeTree(directory.appending("missing-dir"))
    }

    @Test func removeTreeRemovesEverything() throws {
        try SecureFileSystem.createDirectory(directory.appending("t/sub"))
        try SecureFileSystem.writeAtomically([1], to: directory.appending("t/sub/f"))
        try SecureFileSystem.writeAtomically([1], to: directory.appending("t/g"))
        try SecureFileSystem.removeTree(directory.appending("t"))
        #expect(!SecureFileSystem.exists(directory.appending("t")))
    }
}

@Suite struct FileLockTests {
    let directory = TemporaryDirectory()

    @Test func secondLockWaitsThenTimesOut() throws {
        let path = directory.appending("x.lock")
        let first = try FileLock(path: path, timeout: 1)
        let error = #expect(throws: PlatformError.self) { try FileLock(path: path, timeout: 0.1) }
        #expect(error?.operation == .lock)
        withExtendedLifetime(first) {}
    }

    @Test func lockIsReleasedWithTheValue() throws {
        let path = directory.appending("x.lock")
        do { _ = try FileLock(path: path, timeout: 1) }
        _ = try FileLock(path: path, timeout: 0.1)
        #expect(SecureFileSystem.mode(of: path) == 0o600)
    }

    /// Across processes: util-linux `flock` holds the lock; killing it (as kill -9 would) frees it.
    @Test func lockHeldByAnotherProcessAndFreedWhenItDies() throws {
        let path = directory.appending("x.lock")
        let holder = try ChildProcess(
            executable: "/usr/bin/flock", arguments: ["--close", path, "/bin/sh", "-c", "echo locked; sleep 30"])
        #expect(try holder.readLine(timeout: 10) == "locked")
        #expect(throws: PlatformError.self) { try FileLock(path: path, timeout: 0.2) }
        holder.kill()
        _ = try FileLock(path: path, timeout: 2)
    }
}

@Suite struct ProcessEnvironmentTests {
    @Test func readsTheEnvironment() {
        setenv("OSTACK_TEST_VARIABLE", "value=with=equals", 1)
        #expect(ProcessEnvironment.current()["OSTACK_TEST_VARIABLE"] == "value=with=equals")
        #expect(ProcessEnvironment.userID == getuid())
    }
}
