package queries

import (
	"encoding/binary"
	"fmt"
)

// The result rows of the queries written here, as Query.Result decodes
// them: Columns name them as the suite's SQL does.

// int64Of decodes a serde.Int64 key.
func int64Of(key []byte) (int64, error) {
	if len(key) != 8 {
		return 0, fmt.Errorf("%w: a key of %d bytes, want 8 (serde.Int64)", errCorrupt, len(key))
	}
	return int64(binary.BigEndian.Uint64(key)), nil
}

// bidRows is q0's and q1's result: a BidRow per record; q1's price is
// DECIMAL(23, 3), written as the decimal it is.
func bidRows(decimalPrice bool) Result {
	return Result{
		Columns: []string{"auction", "bidder", "price", "dateTime", "extra"},
		Rows: func(_, value []byte, row func(...any)) error {
			r, err := BidRowSerde{}.Deserialize(value)
			if err != nil {
				return err
			}
			var price any = r.Price
			if decimalPrice {
				price = decimal3(r.Price)
			}
			row(r.Auction, r.Bidder, price, Timestamp(r.DateTime), r.Extra)
			return nil
		},
	}
}

func q2Result() Result {
	return Result{
		Columns: []string{"auction", "price"},
		Rows: func(key, value []byte, row func(...any)) error {
			auction, err := int64Of(key)
			if err != nil {
				return err
			}
			price, err := int64Of(value)
			if err != nil {
				return err
			}
			row(auction, price)
			return nil
		},
	}
}

// q5Result: a row per hot auction and window (the SQL selects no window
// column).
func q5Result() Result {
	return Result{
		Columns: []string{"auction", "num"},
		Rows: func(_, value []byte, row func(...any)) error {
			r, err := Q5RowSerde{}.Deserialize(value)
			if err != nil {
				return err
			}
			row(r.Auction, r.Num)
			return nil
		},
	}
}

func q7Result() Result {
	return Result{
		Columns: []string{"auction", "price", "bidder", "dateTime", "extra"},
		Rows: func(_, value []byte, row func(...any)) error {
			b, err := Q7RowSerde{}.Deserialize(value)
			if err != nil {
				return err
			}
			row(b.Auction, b.Price, b.Bidder, Timestamp(b.DateTime), b.Extra)
			return nil
		},
	}
}

func q8Result() Result {
	return Result{
		Columns: []string{"id", "name", "starttime"},
		Rows: func(_, value []byte, row func(...any)) error {
			u, err := Q8RowSerde{}.Deserialize(value)
			if err != nil {
				return err
			}
			row(u.ID, u.Name, Timestamp(u.Start))
			return nil
		},
	}
}

// windowCountResult is q11's and q12's: the bidder (the key), the count
// and the window. q12's output updates each window's count: its rows are
// identified by bidder and window start.
func windowCountResult(updating bool) Result {
	r := Result{
		Columns: []string{"bidder", "bid_count", "starttime", "endtime"},
		Rows: func(key, value []byte, row func(...any)) error {
			bidder, err := int64Of(key)
			if err != nil {
				return err
			}
			c, err := WindowCountSerde{}.Deserialize(value)
			if err != nil {
				return err
			}
			row(bidder, c.Count, Timestamp(c.Start), Timestamp(c.End))
			return nil
		},
	}
	if updating {
		r.Upsert = true
		r.Identity = func(dst, key, value []byte) []byte {
			c, _ := WindowCountSerde{}.Deserialize(value) // a bad value is Rows' to report
			return binary.AppendVarint(append(dst, key...), c.Start)
		}
	}
	return r
}
