//! Bounded fan-out: run independent calls of one step (sealing the files of a checkpoint,
//! committing its committables) together, at most `limit` at a time, results in input order.
//!
//! Every call that started is driven to its end before the fan-out returns, so a step never
//! returns while one of its files is still half-uploaded by a detached task.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::stream::{FuturesUnordered, StreamExt};

/// `f` on every item, at most `limit` calls at a time; every result, in item order.
pub(crate) async fn map<T, R, F, Fut>(items: Vec<T>, limit: usize, mut f: F) -> Vec<R>
where
    F: FnMut(T) -> Fut,
    Fut: Future<Output = R>,
{
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let mut queue = items.into_iter().enumerate();
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < limit.max(1) {
            let Some((i, item)) = queue.next() else { break };
            running.push(tagged(i, f(item)));
        }
        match running.next().await {
            Some((i, r)) => slots[i] = Some(r),
            None => break,
        }
    }
    slots
        .into_iter()
        .map(|r| r.expect("every call ran"))
        .collect()
}

async fn tagged<Fut: Future>(i: usize, fut: Fut) -> (usize, Fut::Output) {
    (i, fut.await)
}

/// `f` on every item, at most `limit` calls at a time, until one fails: no call starts after
/// the first error, the ones already started finish, and the first error is returned.
/// Otherwise every result, in item order.
pub(crate) async fn try_map<T, R, E, F, Fut>(
    items: Vec<T>,
    limit: usize,
    mut f: F,
) -> Result<Vec<R>, E>
where
    F: FnMut(T) -> Fut,
    Fut: Future<Output = Result<R, E>>,
{
    let failed = AtomicBool::new(false);
    let failed = &failed;
    let results = map(items, limit, |item| {
        // Decided when the call would start, not when the item was queued.
        let call = (!failed.load(Ordering::Acquire)).then(|| f(item));
        async move {
            let r = call?.await;
            if r.is_err() {
                failed.store(true, Ordering::Release);
            }
            Some(r)
        }
    })
    .await;
    let mut out = Vec::with_capacity(results.len());
    let mut first_error = None;
    for r in results.into_iter().flatten() {
        match r {
            Ok(v) => out.push(v),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn results_come_in_item_order_and_at_most_limit_run_at_once() {
        let running = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let out = map((0..20u64).collect(), 4, |i| {
            let (running, peak) = (&running, &peak);
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                // Later items finish first.
                tokio::time::sleep(Duration::from_millis(20 - i)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                i * 10
            }
        })
        .await;
        assert_eq!(out, (0..20).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(peak.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn no_call_starts_after_an_error_and_started_ones_finish() {
        let started = AtomicUsize::new(0);
        let finished = AtomicUsize::new(0);
        let r: Result<Vec<u32>, String> = try_map((0..10u32).collect(), 2, |i| {
            let (started, finished) = (&started, &finished);
            started.fetch_add(1, Ordering::SeqCst);
            async move {
                if i == 0 {
                    return Err(format!("item {i} failed"));
                }
                // Still running when item 0 fails.
                tokio::time::sleep(Duration::from_millis(10)).await;
                finished.fetch_add(1, Ordering::SeqCst);
                Ok(i)
            }
        })
        .await;
        assert_eq!(r, Err("item 0 failed".to_string()));
        assert_eq!(started.load(Ordering::SeqCst), 2);
        assert_eq!(finished.load(Ordering::SeqCst), 1);
        assert_eq!(
            try_map(vec![1, 2, 3], 2, |i| async move { Ok::<_, ()>(i) }).await,
            Ok(vec![1, 2, 3])
        );
    }
}
