import CChaosEpoll

/// How the process's allocator treats freed memory.
package enum FreedMemory {
    /// The most freed memory at the top of a heap that is kept for reuse rather than handed back to the kernel.
    package static let keptBytes: Int32 = 256 << 20

    /// Keeps freed heap memory (up to ``keptBytes``) for the next allocation instead of returning it to the kernel at
    /// once, and blocks up to 1 MiB on the heap. A relay recording traffic hands each read's bytes to the audit
    /// thread, which frees them: with glibc's defaults (trim above 128 KiB) a heap was trimmed every few reads and
    /// the relay's next reads faulted fresh zeroed pages in, the largest cost of an audited relay of 1 KB messages
    /// (`perf`: page faults a fifth of the relay thread's samples). What is kept is bounded by the process's peak use,
    /// which its bounded hand-overs bound. Returns whether the allocator took both settings.
    @discardableResult
    package static func keepForReuse() -> Bool {
        chaos_keep_freed_memory(keptBytes, 1 << 20) == 1
    }
}
