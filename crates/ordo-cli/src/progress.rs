//! A spinner for work that may take a while: it appears only once the work has run for a
//! second, and never when stderr is not a terminal.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Runs `work`, showing `message` with a spinner if it lasts more than a second. `work` may
/// update the message through the bar it is given.
pub fn with_spinner<T>(message: &str, work: impl FnOnce(&ProgressBar) -> T) -> T {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"),
    );
    bar.set_message(message.to_string());
    // `finished` is read and the bar shown under one lock, and set and the bar cleared under the
    // same lock, so the spinner can never be shown after the work is over.
    let finished = Arc::new(Mutex::new(false));
    {
        let (bar, finished) = (bar.clone(), Arc::clone(&finished));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            let finished = finished.lock().unwrap_or_else(|e| e.into_inner());
            if !*finished {
                bar.set_draw_target(ProgressDrawTarget::stderr());
                bar.enable_steady_tick(Duration::from_millis(100));
            }
        });
    }
    let result = work(&bar);
    let mut finished = finished.lock().unwrap_or_else(|e| e.into_inner());
    *finished = true;
    bar.finish_and_clear();
    result
}
