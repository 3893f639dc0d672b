//! Replies of identical reads within one batch.
//!
//! Fifty clients pipelining `LRANGE mylist 0 99` (redis-benchmark's
//! LRANGE_100 at -P 16) put up to 800 identical reads into one event-loop
//! turn, and each walked the same hundred records through the engine's
//! merging iterator (~45% of the server's CPU, `perf`). In a batch, LRANGE
//! takes the list's lock stripe like a writer, and its reply is kept under
//! the command and its arguments; the next identical command in the batch
//! gets a copy.
//!
//! Why this is safe: while the batch holds the stripe nobody else writes
//! the list, so the engine's records stay what the first command read. The
//! batch's own writes change them, so a cached reply is only served while
//! the batch's write count is what it was when the reply was made (any
//! write, to any key, makes every cached reply stale). The commands are
//! concurrent requests whose replies are all sent after the batch commits,
//! so answering them from one state is a valid order.
//!
//! Example: A sends `LRANGE q 0 9` twice, B sends `RPUSH q x` then
//! `LRANGE q 0 9`, all in one turn: A's second LRANGE is a copy of its
//! first; B's RPUSH bumps the write count, so B's LRANGE walks the list
//! again and sees `x`.

use super::Tx;
use crate::resp::Reply;

impl Tx<'_> {
    /// Whether this is a pipeline batch (`Tx::new_batch`).
    pub fn is_batch(&self) -> bool {
        self.batch
    }

    /// The reply cached under `id` by [`Tx::cache_reply`], if no write has
    /// been buffered since.
    pub fn cached_reply(&self, id: &[u8]) -> Option<Reply> {
        let cache = self.reply_cache.borrow();
        let (gen, reply) = cache.get(id)?;
        (*gen == self.write_gen).then(|| reply.clone())
    }

    /// Keeps `reply` under `id` for the batch, when this is a batch that
    /// holds the stripe of `record`'s key (else nothing: another client
    /// could change what it was made from).
    pub fn cache_reply(&self, record: &[u8], id: Vec<u8>, reply: &Reply) {
        if self.batch && self.holds_owner_of(record) {
            self.reply_cache
                .borrow_mut()
                .insert(id, (self.write_gen, reply.clone()));
        }
    }
}
