package controller

// latestOnly keeps, of the snapshots of one execution in batch, only the
// newest (by updated_at; of equal ones the later in the stream), in place,
// and returns the shortened batch; job retirements are all kept. The
// index would drop an older snapshot anyway (apply's upsert keeps the
// newer row); this spares it the writes: under load one batch often holds
// the triggered, running and finished events of the same execution, which
// become one row write instead of three.
func latestOnly(batch []histItem) []histItem {
	if len(batch) < 2 {
		return batch
	}
	last := make(map[string]int, len(batch))
	for i, it := range batch {
		if it.exec == nil {
			continue
		}
		if k, ok := last[it.exec.ExecID]; !ok || !it.exec.UpdatedAt.Before(batch[k].exec.UpdatedAt) {
			last[it.exec.ExecID] = i
		}
	}
	if len(last) == len(batch) {
		return batch
	}
	out := batch[:0]
	for i, it := range batch {
		if it.exec == nil || last[it.exec.ExecID] == i {
			out = append(out, it)
		}
	}
	return out
}
