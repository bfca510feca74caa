// fork() detection. OpenCL state (contexts, queues, buffers and the OpenCL runtime's own worker
// threads) does not survive fork(): in a child, the first call that waits on the device hangs
// forever. The driver therefore notes the first OpenCL use of the process, and a fork handler
// marks every child forked (without exec) after it, so the entry-point guard can refuse device
// calls there at once, before taking any lock a parent thread may have held.
#pragma once

namespace aethercl {

// Called before the process's first OpenCL call (cheap and idempotent after the first time).
void note_opencl_use() noexcept;

// True in a process forked from one that had already used OpenCL, and in its descendants.
bool forked_after_opencl_use() noexcept;

// The process that first used OpenCL (the ancestor whose state a forked child cannot use).
long opencl_user_pid() noexcept;

}  // namespace aethercl
