//! Graphs (ABI version 4): the work issued on one stream captured once and replayed with one call.
use crate::device::Device;
use crate::error::{check, check_token, text_out, Result};
use crate::stream::Stream;
use crate::sys;
use std::os::raw::c_void;
use std::ptr::NonNull;

/// A captured graph (aethercl_graph_capture_begin/_end), destroyed on drop (after its last
/// launch has run). Each [`Graph::launch`] reads the current contents of the buffers the captured
/// calls named, so a graph is refilled by writing its input buffers between launches.
#[derive(Debug)]
pub struct Graph {
    handle: NonNull<c_void>,
}

// SAFETY: tokens are validated by the library, whose calls are thread-safe.
unsafe impl Send for Graph {}
unsafe impl Sync for Graph {}

/// What a graph holds (aethercl_graph_info).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphInfo {
    /// The device index.
    pub device: i64,
    /// Recorded operations.
    pub nodes: i64,
    /// Device launches one replay issues.
    pub kernels: i64,
    /// Device memory kept alive for the graph alone.
    pub bytes_held: i64,
}

impl Graph {
    /// Records the work `record` issues on `stream` (None: `device`'s default stream) instead of
    /// running it; calls that must wait for the device there (blocking reads and writes,
    /// synchronisation) are refused while it records. When `record` fails, the capture is ended
    /// and discarded and its error returned.
    pub fn capture<F>(device: Device, stream: Option<&Stream>, record: F) -> Result<Graph>
    where
        F: FnOnce() -> Result<()>,
    {
        let raw = stream.map_or(std::ptr::null_mut(), Stream::as_raw);
        // SAFETY: NULL (the default stream) or a live stream token of this device.
        check("aethercl_graph_capture_begin", unsafe {
            sys::aethercl_graph_capture_begin(device.index(), raw)
        })?;
        let recorded = record();
        // SAFETY: as above; the capture begun here.
        let ended = check_token("aethercl_graph_capture_end", unsafe {
            sys::aethercl_graph_capture_end(device.index(), raw)
        });
        match (recorded, ended) {
            (Ok(()), Ok(handle)) => Ok(Graph { handle }),
            (Err(error), Ok(handle)) => {
                drop(Graph { handle });
                Err(error)
            }
            (Err(error), Err(_)) | (Ok(()), Err(error)) => Err(error),
        }
    }

    /// The raw token, for the functions of [`crate::sys`].
    pub fn as_raw(&self) -> *mut c_void {
        self.handle.as_ptr()
    }

    /// Enqueues the recorded work on `stream` (None: the default stream of the graph's device)
    /// and returns; launches of one graph run one after another.
    pub fn launch(&self, stream: Option<&Stream>) -> Result<()> {
        let raw = stream.map_or(std::ptr::null_mut(), Stream::as_raw);
        // SAFETY: live tokens (the library refuses a stream of another device).
        check("aethercl_graph_launch", unsafe { sys::aethercl_graph_launch(self.as_raw(), raw) })
    }

    /// Nodes, launches per replay and the memory the graph keeps.
    pub fn info(&self) -> Result<GraphInfo> {
        // SAFETY: buffer and capacity come from text_out and match.
        let text = text_out("aethercl_graph_info", |buffer, capacity| unsafe {
            sys::aethercl_graph_info(self.as_raw(), buffer, capacity)
        })?;
        Ok(GraphInfo {
            device: json_integer(&text, "device"),
            nodes: json_integer(&text, "nodes"),
            kernels: json_integer(&text, "kernels"),
            bytes_held: json_integer(&text, "bytes_held"),
        })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: a token this owner made; the library waits for a queued launch first.
        unsafe { sys::aethercl_graph_destroy(self.as_raw()) };
    }
}

/// The integer value of `"key":` in the library's flat JSON object (-1 when absent).
fn json_integer(text: &str, key: &str) -> i64 {
    let pattern = format!("\"{}\"", key);
    text.find(&pattern)
        .map(|at| &text[at + pattern.len()..])
        .and_then(|rest| rest.trim_start().strip_prefix(':'))
        .map(|rest| {
            let rest = rest.trim_start();
            let end = rest
                .find(|c: char| !(c == '-' || c.is_ascii_digit()))
                .unwrap_or(rest.len());
            rest[..end].parse().unwrap_or(-1)
        })
        .unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::json_integer;

    #[test]
    fn reads_integers_of_the_info_object() {
        let text = r#"{"device": 0, "nodes": 12, "kernels":9, "bytes_held": 4096}"#;
        assert_eq!(json_integer(text, "device"), 0);
        assert_eq!(json_integer(text, "nodes"), 12);
        assert_eq!(json_integer(text, "kernels"), 9);
        assert_eq!(json_integer(text, "bytes_held"), 4096);
        assert_eq!(json_integer(text, "missing"), -1);
    }
}
