package nexmark

// Times are milliseconds since the Unix epoch, as eddy's record timestamps,
// so an event's DateTime can be a record's event time without conversion.
// The JSON names are the Flink model's, so serde.JSON output reads like the
// reference's JSON topics.

// Person is a new user of the auction site (the Flink model's Person).
type Person struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	EmailAddress string `json:"emailAddress"`
	CreditCard   string `json:"creditCard"`
	City         string `json:"city"`
	State        string `json:"state"`
	DateTime     int64  `json:"dateTime"`
	Extra        string `json:"extra"`
}

// Auction is an item put up for sale by a Person (the Flink model's Auction).
type Auction struct {
	ID          int64  `json:"id"`
	ItemName    string `json:"itemName"`
	Description string `json:"description"`
	InitialBid  int64  `json:"initialBid"`
	Reserve     int64  `json:"reserve"`
	DateTime    int64  `json:"dateTime"`
	Expires     int64  `json:"expires"`
	Seller      int64  `json:"seller"`
	Category    int64  `json:"category"`
	Extra       string `json:"extra"`
}

// Bid is a Person's offer on an Auction (the Flink model's Bid, with the
// channel and URL that the later queries q14–q22 use).
type Bid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// Kind says which member of an Event is set.
type Kind uint8

// The kinds in the order of the model's proportions within each group of
// events: persons first, then auctions, then bids.
const (
	KindPerson Kind = iota + 1
	KindAuction
	KindBid
)

func (k Kind) String() string {
	switch k {
	case KindPerson:
		return "person"
	case KindAuction:
		return "auction"
	case KindBid:
		return "bid"
	}
	return "invalid"
}

// Event is one generated event: exactly one of Person, Auction and Bid,
// selected by Kind. It is a plain struct rather than an interface so that
// generating and passing an event by value allocates nothing beyond its
// strings.
type Event struct {
	Kind    Kind
	Person  Person
	Auction Auction
	Bid     Bid
}

// DateTime is the event's event time, whichever kind it is.
func (e *Event) DateTime() int64 {
	switch e.Kind {
	case KindPerson:
		return e.Person.DateTime
	case KindAuction:
		return e.Auction.DateTime
	case KindBid:
		return e.Bid.DateTime
	}
	return 0
}
