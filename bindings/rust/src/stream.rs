//! Streams (ordered queues of work on one device) and the events that mark points on them.
use crate::device::Device;
use crate::error::{check, check_token, Result};
use crate::sys;
use std::os::raw::{c_int, c_uint, c_void};
use std::ptr::NonNull;

/// A stream of one device (aethercl_stream_create), destroyed on drop; work already issued on it
/// still completes.
#[derive(Debug)]
pub struct Stream {
    device: Device,
    handle: NonNull<c_void>,
}

// SAFETY: tokens are validated by the library, whose calls are thread-safe.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    pub(crate) fn new(device: Device, flags: c_uint) -> Result<Stream> {
        // SAFETY: plain arguments.
        let handle = check_token("aethercl_stream_create", unsafe {
            sys::aethercl_stream_create(device.index(), flags)
        })?;
        Ok(Stream { device, handle })
    }

    /// The raw token, for the functions of [`crate::sys`].
    pub fn as_raw(&self) -> *mut c_void {
        self.handle.as_ptr()
    }

    /// Waits until all work issued on the stream so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: a live token of this device.
        check("aethercl_stream_synchronize", unsafe {
            sys::aethercl_stream_synchronize(self.device.index(), self.as_raw())
        })
    }

    /// An event at the stream's current end.
    pub fn record(&self) -> Result<Event> {
        Event::record(self.device, self.as_raw())
    }

    /// Makes later work on this stream wait for `event` (of any device), without blocking.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        // SAFETY: live tokens.
        check("aethercl_stream_wait_event", unsafe {
            sys::aethercl_stream_wait_event(
                self.device.index(),
                self.as_raw(),
                event.handle.as_ptr(),
            )
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: a token this owner made.
        unsafe { sys::aethercl_stream_destroy(self.device.index(), self.as_raw()) };
    }
}

/// A point on a stream (aethercl_event_record), destroyed on drop.
#[derive(Debug)]
pub struct Event {
    handle: NonNull<c_void>,
}

// SAFETY: as for Stream.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Event {
    pub(crate) fn record(device: Device, stream: *mut c_void) -> Result<Event> {
        // SAFETY: NULL (the default stream) or a live stream token.
        let handle = check_token("aethercl_event_record", unsafe {
            sys::aethercl_event_record(device.index(), stream)
        })?;
        Ok(Event { handle })
    }

    /// Whether the work before the event has completed; never blocks.
    pub fn query(&self) -> Result<bool> {
        let mut done: c_int = 0;
        // SAFETY: a live token and a valid int to write.
        check("aethercl_event_query", unsafe {
            sys::aethercl_event_query(self.handle.as_ptr(), &mut done)
        })?;
        Ok(done != 0)
    }

    /// Waits until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: a live token.
        check("aethercl_event_synchronize", unsafe {
            sys::aethercl_event_synchronize(self.handle.as_ptr())
        })
    }

    /// Device milliseconds from this event to `end`; both from timing streams of one device.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        let mut ms = 0.0f32;
        // SAFETY: live tokens and a valid float to write.
        check("aethercl_event_elapsed_ms", unsafe {
            sys::aethercl_event_elapsed_ms(self.handle.as_ptr(), end.handle.as_ptr(), &mut ms)
        })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: a token this owner made.
        unsafe { sys::aethercl_event_destroy(self.handle.as_ptr()) };
    }
}
