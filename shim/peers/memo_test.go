package peers

import (
	"fmt"
	"sync"
	"testing"
)

// A Memo keeps results while their sizes fit its Budget; a result past it
// is resolved again each time it is asked for, and what was kept stays.
func TestMemoKeepsWithinItsBudget(t *testing.T) {
	m := Memo[[]int]{Size: func(v []int) int { return len(v) }, Budget: 5}
	calls := map[string]int{}
	get := func(key string, n int) {
		t.Helper()
		v, err := m.Get(key, func() ([]int, error) { calls[key]++; return make([]int, n), nil })
		if err != nil || len(v) != n {
			t.Fatalf("%s: %v, %v", key, v, err)
		}
	}
	for range 3 {
		get("three", 3) // kept: 3 of 5
		get("four", 4)  // 7 > 5: not kept
		get("two", 2)   // kept: 5 of 5
	}
	if want := map[string]int{"three": 1, "four": 3, "two": 1}; fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("resolutions %v, want %v", calls, want)
	}
	var all Memo[int] // no Size: keeps everything
	for range 2 {
		all.Get("k", func() (int, error) { calls["unbounded"]++; return 1, nil })
	}
	if calls["unbounded"] != 1 {
		t.Fatalf("an unbounded Memo resolved %d times", calls["unbounded"])
	}
}

// Two callers resolving one key at once count it once against the budget.
func TestMemoCountsAKeyResolvedTwiceAtOnceOnce(t *testing.T) {
	m := Memo[[]int]{Size: func(v []int) int { return len(v) }, Budget: 8}
	var mu sync.Mutex
	entered, both := 0, make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Get("a", func() ([]int, error) {
				mu.Lock()
				if entered++; entered == 2 {
					close(both)
				}
				mu.Unlock()
				<-both // both callers missed the key
				return make([]int, 3), nil
			})
		}()
	}
	wg.Wait()
	resolved := 0
	for range 2 {
		m.Get("b", func() ([]int, error) { resolved++; return make([]int, 3), nil })
	}
	if resolved != 1 {
		t.Fatalf("b (3 of the 8 left after a's 3) resolved %d times: a was counted twice", resolved)
	}
}
